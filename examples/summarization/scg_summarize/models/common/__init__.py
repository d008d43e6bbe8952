"""Parts shared by the model families: source attention, decoder, generators, rollout, rows."""
