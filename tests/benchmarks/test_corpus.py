"""The corpus every contender gets: deterministic, and of the sizes the issue names."""

from __future__ import annotations

from corpus import AI_TOKENS, HUMAN_TOKENS, JITTER, count_text_tokens, count_tokens, make_corpus


def test_same_seed_same_corpus_and_shorter_is_a_prefix() -> None:
    """A seed fixes the conversation; a shorter run sees the start of a longer one."""
    assert make_corpus(40, seed=3) == make_corpus(40, seed=3)
    assert make_corpus(40, seed=3)[:25] == make_corpus(25, seed=3)
    assert make_corpus(40, seed=3) != make_corpus(40, seed=4)


def test_turn_sizes_stay_within_the_jitter_of_their_targets() -> None:
    """Human turns are about 40 tokens and assistant turns about 120 (+/-10 %)."""
    corpus = make_corpus(200, seed=0)
    for target, texts in (
        (HUMAN_TOKENS, [t.human for t in corpus]),
        (AI_TOKENS, [t.ai for t in corpus]),
    ):
        sizes = [count_text_tokens(text) for text in texts]
        # Decoding a token prefix and stripping it can move a count by a token or two.
        slack = round(target * JITTER) + 2
        assert all(abs(size - target) <= slack for size in sizes), (target, min(sizes), max(sizes))
        assert abs(sum(sizes) / len(sizes) - target) < target * 0.05


def test_count_tokens_adds_the_per_message_overhead() -> None:
    """The benchmark's token rule: tiktoken cl100k of each text plus 3 per message."""
    assert count_tokens([]) == 0
    assert count_tokens(["hello world", "hello world"]) == 2 * (
        count_text_tokens("hello world") + 3
    )
    assert count_text_tokens("hello world") == 2
