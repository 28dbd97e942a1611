"""What a recalled block holds and where it goes: only hits that match the query
well enough and tell the model something its context does not (neither restating
the question nor like a message shown word for word), and, where it fits, beside
the context a read without a block gets, so that its prefix is the same."""

from __future__ import annotations

from langchain_core.messages import BaseMessage, HumanMessage

from tiermem import OMITTED_MARKER, RECALL_MARKER, ConversationMemory, MemoryConfig
from tiermem.testing import FakeSummarizer

from ..conftest import MemoryFactory

CONFIG = MemoryConfig(max_tokens=800)
FACT = "My sister Ana works at a bakery called Pastelaria Rosa, near the old harbour."
WEEKENDS = [
    "We hiked the ridge trail above the lake last weekend.",
    "My cousin painted the garden fence green over the weekend.",
    "The football club held a charity match on the weekend.",
    "Our neighbours threw a loud barbecue party all weekend.",
]


def _filler(memory: ConversationMemory, turns: int, sid: str = "s") -> None:
    for turn in range(turns):
        memory.add_user_message(sid, f"Garden question {turn}: should I water tomato {turn} daily?")
        memory.add_assistant_message(sid, f"Water tomato {turn} every other morning.")


def _block(messages: list[BaseMessage]) -> str | None:
    found = [str(m.content) for m in messages if RECALL_MARKER in m.additional_kwargs]
    assert len(found) <= 1
    return found[0] if found else None


def _memory(make_memory: MemoryFactory) -> ConversationMemory:
    return make_memory(config=CONFIG, summarizer=FakeSummarizer())


def test_hits_far_weaker_than_the_best_are_left_out(make_memory: MemoryFactory) -> None:
    """The fact matches four of the question's words; the weekend lines only its one
    common word: the block holds the fact alone."""
    memory = _memory(make_memory)
    memory.add_user_message("s", FACT)
    for line in WEEKENDS:
        memory.add_user_message("s", line)
    _filler(memory, 60)
    assert memory.get_entries("s")[0].compressed
    messages = memory.get_messages(
        "s", query="Which bakery does my sister Ana work at this weekend?"
    )
    block = _block(messages)
    assert block is not None and FACT in block
    assert not any(line in block for line in WEEKENDS)


def test_a_fact_said_twice_is_recalled_once(make_memory: MemoryFactory) -> None:
    """The same message said again word for word, both copies compressed, comes back
    once: the second copy would tell the model nothing and take the room of another
    hit."""
    memory = _memory(make_memory)
    memory.add_user_message("s", FACT)
    _filler(memory, 5)
    memory.add_user_message("s", FACT)
    _filler(memory, 60)
    assert sum(e.compressed and e.content == FACT for e in memory.get_entries("s")) == 2
    block = _block(memory.get_messages("s", query="Where does my sister Ana work?"))
    assert block is not None and block.count(FACT) == 1


def test_a_message_said_again_is_not_recalled(make_memory: MemoryFactory) -> None:
    """Asking the same thing again brings no block: its earlier copy tells the model
    nothing the newest message does not."""
    memory = _memory(make_memory)
    question = "Any tips for sleeping better? I wake up at four every night."
    memory.add_user_message("s", question)
    memory.add_assistant_message("s", "Keep the room cool and dark, and avoid screens.")
    _filler(memory, 60)
    assert memory.get_entries("s")[0].compressed
    memory.add_user_message("s", question)
    assert _block(memory.get_messages("s")) is None


def test_a_hit_like_a_message_in_view_is_not_recalled(make_memory: MemoryFactory) -> None:
    """An old line of the same shape as one the context shows word for word (other
    numbers, same words) is left out; an old line unlike anything shown comes back."""
    memory = _memory(make_memory)
    old = "Paid 46 euros for new running shoes, the old ones lasted 6 months."
    unlike = "The running club meets by the river every Thursday at seven."
    memory.add_user_message("s", old)
    memory.add_user_message("s", unlike)
    _filler(memory, 60)
    memory.add_user_message(
        "s", "Paid 82 euros for new running shoes, the old ones lasted 9 months."
    )
    memory.add_assistant_message("s", "Nine months is about what running shoes last.")
    memory.add_user_message("s", "When should I replace my running shoes?")
    assert memory.get_entries("s")[0].compressed
    messages = memory.get_messages("s")
    block = _block(messages)
    assert block is not None and unlike in block
    assert old not in block


def test_a_block_that_fits_goes_beside_the_context_a_plain_read_gets(
    make_memory: MemoryFactory,
) -> None:
    """The context is over the budget less the block's share, but the block fits in
    what it leaves: the read is the plain read with the block added, so the prefix
    a prompt cache serves is the same whether or not a block comes."""
    memory = _memory(make_memory)
    memory.add_user_message("s", FACT)
    _filler(memory, 60)
    assert memory.get_entries("s")[0].compressed
    for turn in range(60, 200):
        plain = memory.get_messages("s", query="")
        if memory.counter.count_messages(plain) > CONFIG.max_tokens * (1 - CONFIG.recall_share):
            break
        memory.add_user_message("s", f"Garden question {turn}: should I water tomato {turn}?")
        memory.add_assistant_message("s", f"Water tomato {turn} every other morning.")
    memory.add_user_message("s", "Which bakery does my sister Ana work at?")
    plain = memory.get_messages("s", query="")
    assert memory.counter.count_messages(plain) > CONFIG.max_tokens * (1 - CONFIG.recall_share)
    messages = memory.get_messages("s")
    block = _block(messages)
    assert block is not None and FACT in block
    assert memory.counter.count_messages(messages) <= CONFIG.max_tokens
    assert [m for m in messages if RECALL_MARKER not in m.additional_kwargs] == plain
    assert messages[-2].additional_kwargs.get(RECALL_MARKER)


def test_a_hit_holding_what_a_like_message_lacks_for_the_question_is_recalled(
    make_memory: MemoryFactory,
) -> None:
    """Most words of the old line are those of a line shown, but not the words it has
    for the question (the city, the hotel): it still comes back."""
    memory = _memory(make_memory)
    old = "We booked 5 nights in Tallinn at the Bellevue hotel near the harbour, rooms nice."
    memory.add_user_message("s", old)
    _filler(memory, 60)
    memory.add_user_message("s", "We booked 3 nights at a hostel near the harbour, rooms nice.")
    memory.add_assistant_message("s", "A hostel by the harbour sounds lovely.")
    memory.add_user_message("s", "Which hotel did we book in Tallinn?")
    assert memory.get_entries("s")[0].compressed
    block = _block(memory.get_messages("s"))
    assert block is not None and old in block


def test_a_turn_near_the_budget_whose_block_finds_no_room_compresses_instead_of_cutting(
    make_memory: MemoryFactory,
) -> None:
    """Turn after turn the context fills up; on the turns that leave it a few tokens
    under the budget the block fits nowhere beside it. Cutting the context for the
    block would change its prefix on that turn, and the compression due on the next
    would change it again: the turn compresses now. Here a compression takes most of
    the budget off, so its early margin (an eighth of that) holds any block, and no
    context is ever cut."""
    memory = make_memory(config=DEEP, summarizer=FakeSummarizer())
    memory.add_user_message("s", FACT)
    _filler(memory, 60)
    compressions = memory.get_stats("s").summaries
    for turn in range(TURNS):
        messages = _turn(memory, turn)
        _check_block(memory, messages, turn)
        assert not any(OMITTED_MARKER in m.additional_kwargs for m in messages), turn
        assert [m for m in messages if RECALL_MARKER not in m.additional_kwargs] == (
            memory.get_messages("s", query="")
        )
    assert memory.get_stats("s").summaries > compressions


async def test_an_async_turn_near_the_budget_compresses_too(make_memory: MemoryFactory) -> None:
    """The async twin runs the same turn: it compresses where the sync one does."""
    memory = make_memory(config=DEEP, summarizer=FakeSummarizer())
    await memory.aadd_user_message("s", FACT)
    _filler(memory, 60)
    compressions = (await memory.aget_stats("s")).summaries
    for turn in range(TURNS):
        await memory.aadd_assistant_message(
            "s", f"Water tomato {turn} every other morning, and mulch."
        )
        messages = await memory.aadd_and_get_messages("s", [HumanMessage(_asked(turn))])
        _check_block(memory, messages, turn)
        assert not any(OMITTED_MARKER in m.additional_kwargs for m in messages), turn
    assert (await memory.aget_stats("s")).summaries > compressions


def test_a_turn_far_from_the_budget_cuts_for_its_block_rather_than_compress(
    make_memory: MemoryFactory,
) -> None:
    """A compression that takes little off leaves a margin smaller than the block:
    a turn whose block lacks room with the context further than that under the
    budget cuts the context, as a read does, instead of calling the summarizer many
    turns before the budget is reached."""
    memory = make_memory(config=SHALLOW, summarizer=FakeSummarizer())
    memory.add_user_message("s", FACT)
    _filler(memory, 60)
    cut = 0
    for turn in range(TURNS):
        before = memory.get_stats("s").summaries
        messages = _turn(memory, turn)
        _check_block(memory, messages, turn)
        if any(OMITTED_MARKER in m.additional_kwargs for m in messages):
            cut += 1
            assert memory.get_stats("s").summaries == before, turn
    assert cut


#: Turns of the same question (numbered, so that each is a new message) before the
#: repeated questions themselves are compressed and outrank the fact.
TURNS = 36


def _asked(turn: int) -> str:
    return f"Which bakery does my sister Ana work at? Asking again ({turn})."


#: A compression takes the context down to a fifth of the budget: its early margin,
#: an eighth of the 1,280 tokens it takes off, is 160, more than a block here takes.
DEEP = MemoryConfig(max_tokens=1600, compress_to=0.2)
#: One that takes a tenth off: a margin of 20 tokens, less than a block.
SHALLOW = MemoryConfig(max_tokens=1600, compress_to=0.9)


def _turn(memory: ConversationMemory, turn: int) -> list[BaseMessage]:
    """The model's answer to the last question, then the next question: the turn."""
    memory.add_assistant_message("s", f"Water tomato {turn} every other morning, and mulch.")
    return memory.add_and_get_messages("s", [HumanMessage(_asked(turn))])


def _check_block(memory: ConversationMemory, messages: list[BaseMessage], turn: int) -> None:
    """The turn's context holds the fact in its block and keeps to the budget."""
    block = _block(messages)
    assert block is not None and FACT in block, turn
    assert memory.counter.count_messages(messages) <= memory.config.max_tokens


def test_without_automatic_compression_a_turn_cuts_the_context_for_its_block(
    make_memory: MemoryFactory,
) -> None:
    """With automatic compression off nothing is compressed behind the caller's
    back: the block's room is made by leaving older messages out, as a read does."""
    memory = make_memory(
        config=MemoryConfig(max_tokens=800, auto_compress=False), summarizer=FakeSummarizer()
    )
    memory.add_user_message("s", FACT)
    _filler(memory, 60)
    memory.compress("s")
    compressions = memory.get_stats("s").summaries
    cut = 0
    for turn in range(TURNS):
        messages = memory.add_and_get_messages("s", [HumanMessage(_asked(turn))])
        _check_block(memory, messages, turn)
        cut += any(OMITTED_MARKER in m.additional_kwargs for m in messages)
    assert memory.get_stats("s").summaries == compressions
    assert cut
