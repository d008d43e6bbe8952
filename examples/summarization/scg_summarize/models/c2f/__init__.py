"""The coarse-to-fine family (Ling & Rush 2017, Models 0-3): ``c2f`` / STANDARD / HIER / C2F."""
