"""Write ``dataset.json``: long multi-session conversations for ``tiermem eval context``.

Each conversation is one person talking with an assistant about their life over
months: dated sessions of small talk and everyday tasks, with life events told in
passing (people, places, pets, work, plans, numbers and dates), some of them changed
later, and chatter that reuses their words. The questions come at the end, asked the
way people ask: usually naming the people, places and things of the event, sometimes
not; most are about events far back. Each question labels its evidence turns and the
answer string. Seeded: the same file every run.

    python benchmarks/context/make_context_dataset.py            # write dataset.json
    python benchmarks/context/make_context_dataset.py --check    # fail if the file differs
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
SEED = 31_2026
CONVERSATIONS = 10
SESSIONS = 16
EXCHANGES = (13, 19)
FIRST_DAY = datetime(2023, 2, 6, 18, 30, tzinfo=UTC)

PEOPLE = ["Ana", "Tomás", "Priya", "Jonas", "Mei", "Kwame", "Lucía", "Oskar", "Farah", "Dmitri"]
RELATIONS = ["sister", "brother", "cousin", "neighbour", "colleague", "best friend", "aunt"]
CITIES = ["Lisbon", "Porto", "Krakow", "Osaka", "Nairobi", "Valparaíso", "Tromsø", "Ghent"]
PETS = [("dog", "Biscuit"), ("cat", "Miso"), ("parrot", "Kiwi"), ("rabbit", "Clover")]
BREEDS = {"dog": "beagle", "cat": "Maine Coon", "parrot": "African grey", "rabbit": "Rex"}
JOBS = ["physiotherapist", "data engineer", "primary school teacher", "pastry chef", "nurse"]
COMPANIES = ["Northwind Labs", "Bakery Rosa", "Harbour Clinic", "Tidewater Energy", "Atlas Print"]
HOBBIES = ["bouldering", "pottery", "salsa lessons", "sourdough baking", "trail running"]
CARS = ["a red Škoda Fabia", "a used Toyota Prius", "a blue Volvo V60", "an electric Renault Zoe"]
MONTHS = ["January", "March", "April", "June", "August", "October", "November"]

#: (statement, assistant reply, question naming things, question in other words, answer)
#: with slots filled per conversation. {p}: a person, {r}: their relation, {c}: a city...
EVENTS: list[tuple[str, str, str, str, str]] = [
    (
        "My {r} {p} just moved to {c} for a new job, I'm going to miss her.",
        "Moving to {c} is a big step for {p}. You could plan a visit once she settles in.",
        "Which city did my {r} {p} move to?",
        "Where does my {r} live now?",
        "{c}",
    ),
    (
        "We adopted a {breed} {pet} last weekend and named him {pet_name}.",
        "Congratulations on adopting {pet_name}! A {breed} needs a good routine at first.",
        "What breed is {pet_name}?",
        "What kind of {pet} did we get?",
        "{breed}",
    ),
    (
        "I finally signed the contract, I start as a {job} at {company} on {month} 3.",
        "Well done! Starting at {company} on {month} 3 gives you time to prepare.",
        "When do I start at {company}?",
        "When does my new job begin?",
        "{month} 3",
    ),
    (
        "Booked the flights: we leave for {c2} on the {day}th and stay {nights} nights.",
        "{nights} nights in {c2} sounds lovely. Pack for changeable weather.",
        "How many nights are we staying in {c2}?",
        "How long is our trip going to be?",
        "{nights} nights",
    ),
    (
        "I signed up for {hobby} on Tuesdays with {p2}, the first class was exhausting.",
        "{hobby} with {p2} on Tuesdays is a great habit. It gets easier after a few weeks.",
        "Who do I go to {hobby} with?",
        "Who joins me on Tuesday evenings?",
        "{p2}",
    ),
    (
        "We bought {car} from a dealer in {c3}, it cost {price} euros.",
        "{price} euros for {car} is a fair price. Keep the service papers safe.",
        "How much did we pay for the car?",
        "What did the car from the dealer cost us?",
        "{price} euros",
    ),
    (
        "My {r2} {p3} is getting married in {c} on {month2} {day2}, I'm giving a speech.",
        "A wedding speech for {p3}! Start with a short story only you can tell.",
        "When is {p3}'s wedding?",
        "On what date is the wedding I'm speaking at?",
        "{month2} {day2}",
    ),
    (
        "The doctor said my blood pressure is {bp}, so I'm cutting down on salt.",
        "A reading of {bp} is worth watching. Less salt and regular walks both help.",
        "What was my blood pressure reading?",
        "What did the doctor measure last time?",
        "{bp}",
    ),
]
#: Later changes to an event: (index into EVENTS, statement, reply, slot, slot of the
#: new value); the question then asks for the new value.
CHANGES = [
    (
        3,
        "Change of plans: the trip to {c2} is now {nights2} nights, the hotel had a gap.",
        "{nights2} nights then. Let the airline know if the return date changes.",
        "nights",
        "nights2",
    ),
    (
        0,
        "Update on {p}: she left {c} after all and is now living in {c4}.",
        "So {p} is in {c4} now. That is a big change in a short time.",
        "c",
        "c4",
    ),
]
CHATTER = [
    (
        "Can you give me a quick recipe for a weeknight pasta?",
        "Fry garlic in olive oil, add tomatoes and chilli, simmer ten minutes, toss with pasta.",
    ),
    (
        "My {r} says I should try running in the mornings, is that better than evenings?",
        "Either works; mornings suit people who like routine, evenings suit stiff joints.",
    ),
    (
        "How do I get rid of a merge conflict in git?",
        "Open the conflicting files, keep the lines you want, remove the markers, then commit.",
    ),
    ("It rained all day again, I didn't leave the flat.", "A quiet day in is fine now and then."),
    (
        "What's a good gift for a colleague who is leaving?",
        "A good notebook or a plant, with a card everyone signs, is thoughtful and easy.",
    ),
    (
        "I keep forgetting to drink water at work.",
        "Keep a bottle on your desk and refill it at every break.",
    ),
    (
        "Any tips for sleeping better? I wake up at 4 every night.",
        "Keep the room cool and dark, and avoid screens for an hour before bed.",
    ),
    ("Remind me how to convert Celsius to Fahrenheit?", "Multiply by 9/5 and add 32."),
    (
        "I watched a documentary about {c} yesterday, the old town looked amazing.",
        "Old towns like that are best seen early in the morning before the crowds.",
    ),
    ("Thanks, that's all for today.", "You're welcome, talk soon!"),
    ("hi", "Hello! What's on your mind today?"),
    ("My {pet} woke me up at six again.", "Pets love routine; feeding at the same time helps."),
    (
        "Should I learn Spanish or Portuguese first?",
        "Pick the one you will use sooner; the other comes easier afterwards.",
    ),
    (
        "Can you help me write a polite email asking for a deadline extension?",
        "Sure: thank them, explain the reason briefly, propose a new date, and offer an update.",
    ),
]


#: Chatter that names people, places, numbers and dates too, in the words of the
#: events: a summary or a search cannot tell the events by their kind of words alone.
NOISY = [
    (
        "{px} from work told me about a café in {cx}, apparently a coffee there costs {n} euros.",
        "{n} euros for a coffee is steep, but cafés in {cx} are famous for it.",
    ),
    (
        "My {rx} {px} is thinking about visiting {cx} in {mx}, she asked me for tips.",
        "{mx} is a good time for {cx}; tell {px} to book early.",
    ),
    (
        "We had dinner with {px} and {py} on Saturday, they just got back from {cx}.",
        "Dinner with friends back from {cx} sounds fun. Did they enjoy the trip?",
    ),
    (
        "The plumber is coming on {mx} {d} between 8 and 10, I have to stay home.",
        "Noted: the plumber on {mx} {d}. Maybe work from home that morning.",
    ),
    (
        "{px}'s {petx} is staying with us for {nn} nights while they travel.",
        "Looking after a {petx} for {nn} nights is a nice favour for {px}.",
    ),
    (
        "My {rx} {px} thinks I should move to {cx}, but I'm not sure.",
        "Moving to {cx} is a big decision; list what you would gain and lose.",
    ),
    (
        "I started a new book about {cx}, the author is {px} {py}son.",
        "A book about {cx} sounds like good holiday reading.",
    ),
    (
        "Paid {n} euros for new running shoes, the old ones lasted {nn} months.",
        "{nn} months is about what running shoes last. Enjoy the new pair.",
    ),
    (
        "{px} booked a table for {nn} at the tapas place on {mx} {d}.",
        "A table for {nn} on {mx} {d}, that should be a lively evening.",
    ),
]


def _noise(rng: random.Random) -> dict[str, str]:
    px, py = rng.sample(PEOPLE, 2)
    return {
        "px": px,
        "py": py,
        "rx": rng.choice(RELATIONS),
        "cx": rng.choice(CITIES),
        "mx": rng.choice(MONTHS),
        "d": str(rng.randint(2, 27)),
        "n": str(rng.randint(3, 90)),
        "nn": str(rng.randint(2, 12)),
        "petx": rng.choice(PETS)[0],
    }


def _slots(rng: random.Random) -> dict[str, str]:
    people = rng.sample(PEOPLE, 4)
    cities = rng.sample(CITIES, 5)
    pet, pet_name = rng.choice(PETS)
    months = rng.sample(MONTHS, 2)
    nights = rng.randint(3, 9)
    return {
        "p": people[0],
        "p2": people[1],
        "p3": people[2],
        "r": rng.choice(RELATIONS),
        "r2": rng.choice(RELATIONS),
        "c": cities[0],
        "c2": cities[1],
        "c3": cities[2],
        "c4": cities[3],
        "pet": pet,
        "pet_name": pet_name,
        "breed": BREEDS[pet],
        "job": rng.choice(JOBS),
        "company": rng.choice(COMPANIES),
        "month": months[0],
        "month2": months[1],
        "day": str(rng.randint(2, 27)),
        "day2": str(rng.randint(2, 27)),
        "nights": str(nights),
        "nights2": str(nights + rng.randint(2, 4)),
        "hobby": rng.choice(HOBBIES),
        "car": rng.choice(CARS),
        "price": f"{rng.randint(6, 24)},{rng.randint(1, 9)}00",
        "bp": f"{rng.randint(128, 150)}/{rng.randint(82, 95)}",
    }


def _conversation(index: int, rng: random.Random) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    slots = _slots(rng)
    cid = f"conv-{index}"
    # Events are told in the first sessions (far back), changes in the middle ones.
    told = {event: rng.randint(0, SESSIONS // 2) for event in range(len(EVENTS))}
    changed = {change[0]: rng.randint(SESSIONS // 2 + 1, SESSIONS - 2) for change in CHANGES}
    evidence: dict[int, list[str]] = {}
    sessions = []
    day = FIRST_DAY + timedelta(days=index)
    turn_no = 0

    def turn(role: str, text: str) -> dict[str, str]:
        nonlocal turn_no
        turn_no += 1
        return {"id": f"{cid}-t{turn_no}", "role": role, "content": text.format(**slots)}

    for number in range(SESSIONS):
        turns: list[dict[str, str]] = []
        planted = [e for e, s in told.items() if s == number]
        updates = [c for c in CHANGES if changed[c[0]] == number]
        exchanges = rng.randint(*EXCHANGES)
        spots = rng.sample(range(exchanges), min(exchanges, len(planted) + len(updates)))
        plan = [("event", e) for e in planted] + [("change", c) for c in updates]
        at = dict(zip(spots, plan, strict=False))
        for exchange in range(exchanges):
            # A planned exchange: ("event", index) or ("update", (event, ...)).
            kind: Any = at.get(exchange)
            if kind is None and rng.random() < 0.5:
                user, reply = rng.choice(NOISY)
                noise = _noise(rng)
                turns += [
                    turn("user", user.format(**noise)),
                    turn("assistant", reply.format(**noise)),
                ]
            elif kind is None:
                user, reply = rng.choice(CHATTER)
                turns += [turn("user", user), turn("assistant", reply)]
            elif kind[0] == "event":
                statement, reply, *_ = EVENTS[kind[1]]
                turns += [turn("user", statement), turn("assistant", reply)]
                evidence[kind[1]] = [turns[-2]["id"]]
            else:
                event, statement, reply, slot, new = kind[1]
                turns += [turn("user", statement), turn("assistant", reply)]
                evidence[event] = [turns[-2]["id"]]
                slots[slot] = slots[new]
        sessions.append({"id": f"{cid}-s{number}", "date": day.isoformat(), "turns": turns})
        day += timedelta(days=rng.randint(4, 12), minutes=rng.randint(0, 120))
    questions = []
    for event, (_, _, named, vague, answer) in enumerate(EVENTS):
        question = named if rng.random() < 0.7 else vague
        questions.append(
            {
                "id": f"{cid}-q{event}",
                "conversation": cid,
                "question": question.format(**slots),
                "category": "named" if question is named else "other-words",
                "evidence": evidence[event],
                "answer": answer.format(**slots),
            }
        )
    return {"id": cid, "sessions": sessions}, questions


def build() -> dict[str, Any]:
    """The whole dataset, from :data:`SEED`."""
    rng = random.Random(SEED)
    conversations, questions = [], []
    for index in range(CONVERSATIONS):
        conversation, asked = _conversation(index, rng)
        conversations.append(conversation)
        questions += asked
    return {"name": "context-life", "conversations": conversations, "questions": questions}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if dataset.json differs")
    args = parser.parse_args()
    text = json.dumps(build(), ensure_ascii=False, indent=1) + "\n"
    target = HERE / "dataset.json"
    if args.check:
        same = target.exists() and target.read_text(encoding="utf-8") == text
        print("dataset.json is up to date" if same else "dataset.json differs: regenerate it")
        return 0 if same else 1
    target.write_text(text, encoding="utf-8")
    data = json.loads(text)
    turns = sum(len(s["turns"]) for c in data["conversations"] for s in c["sessions"])
    print(f"wrote {target.name}: {turns} turns, {len(data['questions'])} questions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
