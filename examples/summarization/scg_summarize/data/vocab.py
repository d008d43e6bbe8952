"""The word vocabulary: :class:`Vocab` with the special tokens and a frequency cut-off.

Ids ``0..3`` are the specials ``<pad>``, ``<unk>``, ``<s>``, ``</s>``; then the most frequent
words (ties broken alphabetically, so building is deterministic). The vocabulary file written
by :meth:`Vocab.save` has one ``token<TAB>count`` line per id.
"""

from __future__ import annotations

import hashlib
import operator
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

__all__ = ["BOS", "EOS", "PAD", "SPECIALS", "UNK", "Vocab", "require_same_vocab"]

PAD = "<pad>"
UNK = "<unk>"
BOS = "<s>"
EOS = "</s>"
SPECIALS: tuple[str, ...] = (PAD, UNK, BOS, EOS)
_WHITESPACE_RE = re.compile(r"\s")  # (a str pattern's \s is exactly str.isspace)


class Vocab:
    """A bijection between tokens and ids with ``<pad>``=0, ``<unk>``=1, ``<s>``=2, ``</s>``=3.

    Args:
        tokens: the non-special words in id order (ids start at 4).
        counts: optional corpus counts of the words (saved alongside, informational).
    """

    pad_id = 0
    unk_id = 1
    bos_id = 2
    eos_id = 3

    def __init__(self, tokens: Iterable[str], counts: Mapping[str, int] | None = None) -> None:
        if isinstance(tokens, str):  # (its characters would become the words)
            raise TypeError(f"Vocab(tokens): expected a list of words, got a string {tokens[:40]!r}")
        words = list(tokens)
        bad = next((t for t in words if not isinstance(t, str)), None)
        if bad is not None:
            raise TypeError(f"Vocab(tokens): expected words (strings), got {type(bad).__name__} {bad!r}")
        self._itos: list[str] = [*SPECIALS, *words]
        self._stoi: dict[str, int] = {tok: i for i, tok in enumerate(self._itos)}
        # checked for the whole list at once (a vocabulary of 50,000 words loads in a few ms); only a
        # bad list is walked word by word, to name the first bad word
        if len(self._stoi) != len(self._itos) or "" in words or _WHITESPACE_RE.search("".join(words)):
            seen = set(SPECIALS)
            for token in words:
                if not token or _WHITESPACE_RE.search(token):
                    raise ValueError(f"vocabulary tokens must be non-empty, no spaces: {token!r}")
                if token in seen:
                    raise ValueError(f"duplicate vocabulary token {token!r}")
                seen.add(token)
        self.counts: dict[str, int] = dict(counts or {})

    @classmethod
    def from_counter(cls, counter: Mapping[str, int], max_size: int, min_freq: int = 1) -> Vocab:
        """The ``max_size`` most frequent words with count >= ``min_freq``.

        Specials in ``counter`` are ignored (they always have their fixed ids). Ties are
        broken alphabetically.
        """
        if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 0:
            raise ValueError(f"Vocab.from_counter(max_size=...): expected an int >= 0, got {max_size!r}")
        candidates = [(w, c) for w, c in counter.items() if c >= min_freq and w not in SPECIALS]
        candidates.sort(key=lambda item: (-item[1], item[0]))
        kept = candidates[:max_size]
        return cls((w for w, _ in kept), counts=dict(kept))

    @classmethod
    def build(cls, documents: Iterable[Sequence[str]], max_size: int, min_freq: int = 1) -> Vocab:
        """Count the tokens of ``documents`` and keep the most frequent (see
        :meth:`from_counter`)."""
        counter: Counter[str] = Counter()
        for doc in documents:
            counter.update(doc)
        return cls.from_counter(counter, max_size, min_freq)

    def __len__(self) -> int:
        return len(self._itos)

    def __contains__(self, token: object) -> bool:
        return token in self._stoi

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocab) and self._itos == other._itos

    def __hash__(self) -> int:
        return hash(tuple(self._itos))

    def __repr__(self) -> str:
        return f"Vocab(size={len(self)})"

    def digest(self) -> str:
        """A short fingerprint of the tokens in id order (SHA-256, 16 hex digits): checkpoints
        record it, so that weights are never read with another vocabulary of the same size."""
        return hashlib.sha256("\n".join(self._itos).encode("utf-8")).hexdigest()[:16]

    @property
    def tokens(self) -> list[str]:
        """All tokens in id order, specials first."""
        return list(self._itos)

    def token_to_id(self, token: str) -> int:
        """The id of ``token``, or ``unk_id`` for an out-of-vocabulary word."""
        return self._stoi.get(token, self.unk_id)

    def id_to_token(self, index: int) -> str:
        """The token with id ``index`` (raises ``IndexError`` for an invalid id)."""
        if not 0 <= index < len(self._itos):
            raise IndexError(f"token id {index} is not in the vocabulary (ids 0-{len(self._itos) - 1})")
        return self._itos[index]

    def encode(self, tokens: Iterable[str], *, bos: bool = False, eos: bool = False) -> list[int]:
        """Ids of ``tokens`` (unknown -> ``<unk>``), optionally wrapped in ``<s>``/``</s>``."""
        if isinstance(tokens, str):  # (its characters would be looked up as words)
            raise TypeError(
                f"Vocab.encode(tokens): expected a list of words (split the text), got a string {tokens[:40]!r}"
            )
        ids = [self._stoi.get(t, self.unk_id) for t in tokens]
        if bos:
            ids.insert(0, self.bos_id)
        if eos:
            ids.append(self.eos_id)
        return ids

    def decode(
        self,
        ids: Iterable[int],
        *,
        strip_specials: bool = True,
        stop_at_eos: bool = True,
        keep_unk: bool = True,
    ) -> list[str]:
        """Tokens of ``ids``.

        Args:
            ids: token ids (ints, or anything ``int()`` accepts such as 0-d tensors).
            strip_specials: drop ``<pad>``, ``<s>`` and ``</s>``.
            stop_at_eos: stop at the first ``</s>`` after the first token (a leading
                ``<s>`` is skipped, so ``decode(encode(x, bos=True, eos=True)) == x``).
            keep_unk: keep ``<unk>`` tokens (else drop them).
        """
        out: list[str] = []
        for position, raw in enumerate(ids):
            try:
                index = operator.index(raw)  # (an int, a NumPy or 0-d tensor integer; a float is refused, not cut)
            except TypeError:
                raise TypeError(f"Vocab.decode: id {position} is {raw!r}, not an integer") from None
            if stop_at_eos and index == self.eos_id and position > 0:
                break
            if strip_specials and index in (self.pad_id, self.bos_id, self.eos_id):
                continue
            if not keep_unk and index == self.unk_id:
                continue
            out.append(self.id_to_token(index))
        return out

    def unk_rate(self, tokens: Sequence[str]) -> float:
        """The fraction of ``tokens`` that are out of vocabulary (0.0 for no tokens)."""
        if not tokens:
            return 0.0
        return sum(t not in self._stoi for t in tokens) / len(tokens)

    def save(self, path: str | Path) -> None:
        """Write ``token<TAB>count`` lines in id order (UTF-8)."""
        lines = [f"{tok}\t{self.counts.get(tok, 0)}\n" for tok in self._itos]
        Path(path).write_text("".join(lines), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> Vocab:
        """Read a file written by :meth:`save` (or one token per line, without counts).

        The first four lines must be the specials in order.
        """
        path = Path(path)
        tokens: list[str] = []
        counts: dict[str, int] = {}
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise ValueError(
                f"{path}: not UTF-8 text (byte {err.object[err.start]:#x} at offset {err.start})"
            ) from None
        for lineno, line in enumerate(text.split("\n"), 1):
            if not line:
                continue
            token, _, count = line.partition("\t")
            if lineno <= len(SPECIALS):
                if token != SPECIALS[lineno - 1]:
                    raise ValueError(f"{path}:{lineno}: expected special token {SPECIALS[lineno - 1]!r}, got {token!r}")
                continue
            tokens.append(token)
            if count:
                try:
                    counts[token] = int(count)
                except ValueError:
                    raise ValueError(f"{path}:{lineno}: the count {count!r} of {token!r} is not an integer") from None
        if not tokens:
            raise ValueError(
                f"{path}: no words (an empty vocabulary file, or the special tokens {', '.join(SPECIALS)} alone)"
            )
        try:
            return cls(tokens, counts=counts)
        except ValueError as err:  # (a duplicate or a token with a space: named with its line)
            found = re.search(r"('.*'|\".*\")$", str(err))  # (the token, as repr shows it)
            lines = [i for i, t in enumerate(tokens, len(SPECIALS) + 1) if found and repr(t) == found.group(1)]
            at = lines[-1] if lines else None  # (a duplicate: its second line)
            raise ValueError(f"{path}{'' if at is None else f':{at}'}: {err}") from None


def require_same_vocab(model_vocab: Vocab, corpus_vocab: Vocab, corpus: object, run: object) -> None:
    """Raise ``ValueError`` unless a prepared corpus was encoded with the model's vocabulary (ids
    of another vocabulary decode to fluent-looking garbage; ``evaluate`` and ``summarize --data``
    share this check)."""
    if model_vocab != corpus_vocab:
        raise ValueError(
            f"{corpus}: its vocabulary ({len(corpus_vocab)} words) differs from the run's "
            f"({run}, {len(model_vocab)} words): the corpus was prepared separately; wrong --data?"
        )
