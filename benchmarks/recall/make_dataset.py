"""Write the labelled recall datasets ``dev.json`` and ``heldout.json`` (seeded).

Each conversation is one user's chats with an assistant over months: dated sessions
of task talk and small talk, with facts about the user planted in some user turns
(a job, a pet, trips, things that change), distractor turns that share their words,
and questions about the facts asked in other words. See README.md beside this file
for the format and the question categories.

    python benchmarks/recall/make_dataset.py            # both files, default seeds
    python benchmarks/recall/make_dataset.py --check    # fail if the files differ
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))  # the banks beside this script, however it is run

from bank_dev import DEV  # noqa: E402
from bank_heldout import HELDOUT  # noqa: E402
from kinds import QA, Bank, Kind  # noqa: E402

#: (file stem, bank, seed, first session date) of each dataset.
DATASETS = [
    ("dev", DEV, 20240611, datetime(2023, 1, 9, tzinfo=UTC)),
    ("heldout", HELDOUT, 97531, datetime(2022, 9, 5, tzinfo=UTC)),
]
CONVERSATIONS = 8
SESSIONS = 16
#: Exchanges (a user turn and the assistant's reply) per session.
EXCHANGES = (10, 13)
#: Distractor turns per kind of fact and conversation.
NOISE_PER_KIND = 3
#: Questions comparing two events of different sessions, per conversation.
ORDER_QUESTIONS = 4
MAX_FACTS_PER_SESSION = 3


@dataclass
class Event:
    """A planted statement: a kind's value said in one session."""

    kind: Kind
    step: int  # 0 the first statement; then the change or instance number
    slots: dict[str, str]
    session: int
    turn: str = ""

    @property
    def phrase(self) -> str:
        """The statement named as an event (temporal questions)."""
        template = self.kind.change_event if self.step and self.kind.updates else self.kind.event
        return template.format(**self.slots)


def draw(kind: Kind, rng: random.Random, avoid: set[str]) -> dict[str, str]:
    """A value of ``kind`` whose key slot is none of ``avoid``."""
    for _ in range(100):
        slots = {name: rng.choice(values) for name, values in kind.slots.items()}
        if not kind.key or slots[kind.key] not in avoid:
            return slots
    raise ValueError(f"{kind.name}: too few values of {kind.key}")


def spaced(rng: random.Random, count: int, gap: int, sessions: int) -> list[int]:
    """``count`` increasing session numbers at least ``gap`` apart."""
    while True:
        picks = sorted(rng.sample(range(sessions), count))
        if all(b - a >= gap for a, b in zip(picks, picks[1:], strict=False)):
            return picks


def plan(bank: Bank, rng: random.Random) -> list[Event]:
    """Every planted statement of a conversation, each in its session."""
    load = [0] * SESSIONS
    events: list[Event] = []
    for kind in bank.kinds:
        steps = max(kind.updates + 1, kind.instances, 1)
        for _ in range(200):
            if kind.instances:
                sessions = spaced(rng, steps, 1, SESSIONS)
            elif kind.updates:
                sessions = spaced(rng, steps, 3, SESSIONS)
            else:
                sessions = [rng.randrange(SESSIONS - 2)]
            if all(load[s] < MAX_FACTS_PER_SESSION for s in sessions):
                break
        seen: set[str] = set()
        previous: dict[str, str] = {}
        for step, session in enumerate(sessions):
            slots = draw(kind, rng, seen)
            if kind.key:
                seen.add(slots[kind.key])
            full = {**slots, **{f"old_{k}": v for k, v in previous.items()}}
            events.append(Event(kind, step, full, session))
            load[session] += 1
            previous = slots
    return events


def month(moment: datetime) -> str:
    return moment.strftime("%B %Y")


def build_conversation(
    bank: Bank, rng: random.Random, cid: str, start: datetime, user: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One conversation and the questions about it."""
    events = plan(bank, rng)
    dates = []
    moment = start + timedelta(days=rng.randrange(30), hours=rng.randrange(8, 21))
    for _ in range(SESSIONS):
        dates.append(moment)
        moment += timedelta(days=rng.choice((14, 17, 21, 24, 28, 35)), minutes=rng.randrange(600))
    noise: dict[int, list[tuple[str, str]]] = {}
    for kind in bank.kinds:
        own = {e.slots.get(kind.key, "") for e in events if e.kind is kind}
        for _ in range(NOISE_PER_KIND):
            text = rng.choice(kind.noise).format(**draw(kind, rng, own))
            text = text[0].upper() + text[1:]
            noise.setdefault(rng.randrange(SESSIONS), []).append(
                (text, rng.choice(bank.noise_replies))
            )
    sessions = []
    for number, date in enumerate(dates):
        planted = [e for e in events if e.session == number]
        exchanges: list[tuple[str, str, Event | None]] = []
        for event in planted:
            kind = event.kind
            templates = kind.changes if event.step and kind.updates else kind.says
            statement = rng.choice(templates).format(**event.slots)
            text = rng.choice(bank.wrappers).format(text=statement)
            text = text[0].upper() + text[1:]
            exchanges.append((text, rng.choice(kind.acks).format(**event.slots), event))
        exchanges += [(u, a, None) for u, a in noise.get(number, [])]
        target = rng.randint(*EXCHANGES)
        # Small talk and task talk, no exchange twice in a session.
        for user_text, reply in rng.sample(bank.fillers, max(target - 1 - len(exchanges), 0)):
            slots = {name: rng.choice(values) for name, values in bank.filler_slots.items()}
            exchanges.append((user_text.format(**slots), reply.format(**slots), None))
        rng.shuffle(exchanges)
        hello, answer = rng.choice(bank.greetings)
        exchanges.insert(0, (hello.format(user=user), answer.format(user=user), None))
        turns = []
        for index, (user_text, reply, planted_event) in enumerate(exchanges):
            tid = f"{cid}-s{number + 1:02d}-t{2 * index + 1:02d}"
            if planted_event is not None:
                planted_event.turn = tid
            turns.append({"id": tid, "role": "user", "content": user_text})
            turns.append(
                {
                    "id": f"{cid}-s{number + 1:02d}-t{2 * index + 2:02d}",
                    "role": "assistant",
                    "content": reply,
                }
            )
        sessions.append(
            {"id": f"{cid}-s{number + 1:02d}", "date": date.isoformat(), "turns": turns}
        )
    questions = ask(rng, events, dates)
    for number, question in enumerate(questions, 1):
        question["id"] = f"{cid}-q{number:03d}"
        question["conversation"] = cid
    return {"id": cid, "sessions": sessions}, questions


def question(
    rng: random.Random, pairs: tuple[QA, ...], category: str, evidence: list[Event], **slots: str
) -> dict[str, Any]:
    text, answer = rng.choice(pairs)
    return {
        "question": text.format(**slots),
        "category": category,
        "evidence": [e.turn for e in evidence],
        "answer": answer.format(**slots),
    }


def ask(rng: random.Random, events: list[Event], dates: list[datetime]) -> list[dict[str, Any]]:
    """The questions about one conversation's planted events."""
    found: list[dict[str, Any]] = []
    by_kind: dict[str, list[Event]] = {}
    for event in events:
        by_kind.setdefault(event.kind.name, []).append(event)
    for chain in by_kind.values():
        kind, first, last = chain[0].kind, chain[0], chain[-1]
        if kind.instances:
            for event in chain:
                for pairs in kind.asks_each:
                    found.append(question(rng, (pairs,), "single-hop", [event], **event.slots))
                if kind.when:
                    found.append(
                        question(
                            rng,
                            kind.when,
                            "temporal",
                            [event],
                            **event.slots,
                            month=month(dates[event.session]),
                        )
                    )
            listed = ", ".join(kind.label.format(**e.slots) for e in chain)
            found.append(question(rng, kind.asks_all, "multi-hop", chain, values=listed))
            continue
        for pairs in kind.asks:
            found.append(question(rng, (pairs,), "single-hop", [first], **first.slots))
        if kind.when:
            found.append(
                question(
                    rng,
                    kind.when,
                    "temporal",
                    [first],
                    **first.slots,
                    month=month(dates[first.session]),
                )
            )
        if kind.updates:
            found.append(question(rng, kind.asks_now, "update", [last], **last.slots))
            if len(kind.asks_now) > 1 and rng.random() < 0.5:
                found.append(question(rng, kind.asks_now, "update", [last], **last.slots))
            found.append(question(rng, kind.asks_before, "single-hop", [first], **first.slots))
            listed = " -> ".join(kind.label.format(**e.slots) for e in chain)
            found.append(question(rng, kind.asks_history, "multi-hop", chain, values=listed))
    named = [e for e in events if e.phrase]
    for _ in range(ORDER_QUESTIONS):
        a, b = rng.sample(named, 2)
        while a.session == b.session:
            a, b = rng.sample(named, 2)
        early = a if a.session < b.session else b
        weeks = round(abs((dates[a.session] - dates[b.session]).days) / 7)
        form = rng.randrange(3)
        if form == 0:
            text, answer = f"Which came first: {a.phrase} or {b.phrase}?", early.phrase
        elif form == 1:
            text = f"Did {a.phrase} happen before or after {b.phrase}?"
            answer = "before" if a is early else "after"
        else:
            text = f"About how many weeks passed between {a.phrase} and {b.phrase}?"
            answer = f"about {weeks} weeks"
        found.append(
            {
                "question": text,
                "category": "temporal",
                "evidence": [a.turn, b.turn],
                "answer": answer,
            }
        )
    return found


def build(name: str, bank: Bank, seed: int, start: datetime) -> dict[str, Any]:
    """A whole dataset: its conversations and its questions (shuffled, so that the
    first N questions of a quick run cover every category)."""
    rng = random.Random(seed)
    users = rng.sample(bank.first_names, CONVERSATIONS)
    conversations, questions = [], []
    for number in range(CONVERSATIONS):
        own = random.Random(f"{seed}-{number}")
        begin = start + timedelta(days=rng.randrange(120))
        conversation, asked = build_conversation(
            bank, own, f"{name}-{number + 1:02d}", begin, users[number]
        )
        conversations.append(conversation)
        questions += asked
    rng.shuffle(questions)
    fields = ("id", "conversation", "question", "category", "evidence", "answer")
    ordered = [{key: q[key] for key in fields} for q in questions]
    return {"name": name, "seed": seed, "conversations": conversations, "questions": ordered}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="folder to write to")
    parser.add_argument("--check", action="store_true", help="fail if the files would change")
    options = parser.parse_args(argv)
    stale = []
    for name, bank, seed, start in DATASETS:
        text = json.dumps(build(name, bank, seed, start), indent=1, ensure_ascii=False) + "\n"
        path = options.out / f"{name}.json"
        if options.check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                stale.append(str(path))
            continue
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    if stale:
        print("out of date (run make_dataset.py): " + ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
