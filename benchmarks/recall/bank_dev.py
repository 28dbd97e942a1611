"""The dev bank: everyday life (work, pets, home, trips, food, reading)."""

from __future__ import annotations

from kinds import Bank, Kind

CITIES = ("Lisbon", "Montreal", "Kyoto", "Edinburgh", "Valencia", "Krakow", "Oaxaca", "Tallinn")

KINDS = (
    Kind(
        name="pet",
        slots={
            "breed": ("beagle", "border collie", "dachshund", "greyhound", "corgi", "whippet"),
            "pet": ("Max", "Biscuit", "Pepper", "Otis", "Juniper", "Waffles", "Ziggy"),
        },
        key="breed",
        says=(
            "we finally adopted a {breed} from the shelter on Saturday, his name is {pet}.",
            "meet the newest member of the family: {pet}, a two-year-old {breed} we "
            "picked up from a rescue.",
        ),
        acks=(
            "Congratulations! {pet} is a lovely name. The first weeks with a rescue can be "
            "a big adjustment, so go easy on yourselves.",
            "That's wonderful news! A {breed} will keep you busy. Do you have a crate and "
            "a vet lined up yet?",
        ),
        noise=(
            "My neighbor's {breed} keeps digging under our fence, it's driving me nuts.",
            "There was a poster on our street about a lost dog, a little {breed} called {pet}.",
            "Do {breed}s shed a lot? My cousin is thinking about getting a puppy.",
        ),
        asks=(
            ("What kind of dog does the user have?", "{breed}"),
            ("What's the name of my dog?", "{pet}"),
        ),
        event="getting the dog",
        when=(
            ("When did the user bring their dog home?", "{month}"),
            ("In which month did I adopt {pet}?", "{month}"),
        ),
    ),
    Kind(
        name="sister",
        slots={
            "sibling": ("Clara", "Nadia", "Ruth", "Imogen", "Talia", "Bea"),
            "city": CITIES,
            "work": (
                "a midwife",
                "a civil engineer",
                "a pastry chef",
                "a court interpreter",
                "a physiotherapist",
                "a park ranger",
            ),
        },
        key="city",
        says=(
            "my sister {sibling} just called, she's loving {city}. She works there as {work}.",
            "I miss my sister {sibling} so much. She moved to {city} years ago and works as "
            "{work} now.",
        ),
        acks=(
            "It sounds like {sibling} has built a good life there. Do you get to visit often?",
            "Long distance with family is hard. Maybe plan a video call this week?",
        ),
        noise=(
            "A colleague of mine just moved to {city} and works as {work}, small world.",
            "I read an article about {city} being one of the best cities for families.",
        ),
        asks=(
            ("Where does the user's sibling live?", "{city}"),
            ("What does my sister do for a living?", "{work}"),
        ),
    ),
    Kind(
        name="allergy",
        slots={"allergen": ("peanuts", "shellfish", "penicillin", "cats", "kiwi", "sesame")},
        key="allergen",
        says=(
            "heads up for any recipes you suggest: I'm allergic to {allergen}.",
            "I had a bad reaction again, my doctor confirmed I'm allergic to {allergen}.",
        ),
        acks=(
            "Thanks for telling me, I'll keep {allergen} out of anything I suggest.",
            "That sounds scary. I'll keep that in mind from now on.",
        ),
        noise=(
            "My friend's kid has a {allergen} allergy, so the birthday party was a whole thing.",
            "Is it true that a {allergen} allergy can develop in adulthood?",
        ),
        asks=(
            (
                "Is there anything the user can't eat or be exposed to for medical reasons?",
                "{allergen}",
            ),
            ("What am I allergic to?", "{allergen}"),
        ),
        event="the allergy diagnosis",
        when=(("When did the user mention their allergy?", "{month}"),),
    ),
    Kind(
        name="instrument",
        slots={
            "instrument": ("cello", "ukulele", "saxophone", "banjo", "piano", "drums"),
            "teacher": ("Mr. Alvarez", "Greta", "Professor Lin", "Dominik", "Aunt Sue"),
        },
        key="instrument",
        says=(
            "I signed up for {instrument} lessons! My teacher is {teacher}, first class is "
            "Thursday.",
            "guess what, I've started learning the {instrument}. {teacher} is teaching me "
            "once a week.",
        ),
        acks=(
            "How exciting! Practicing a little every day matters more than long sessions.",
            "Great choice. Let me know if you want a practice schedule.",
        ),
        noise=(
            "We went to a concert last night and the {instrument} player was incredible.",
            "My nephew wants a {instrument} for his birthday, is that a good first instrument?",
        ),
        asks=(
            ("What musical instrument is the user picking up?", "{instrument}"),
            ("Who gives me my music lessons?", "{teacher}"),
        ),
        event="starting music lessons",
        when=(("When did the user begin taking music lessons?", "{month}"),),
    ),
    Kind(
        name="job",
        slots={
            "title": (
                "data analyst",
                "product manager",
                "nurse",
                "UX designer",
                "high school chemistry teacher",
                "accountant",
                "software engineer",
            ),
            "company": (
                "Brightline",
                "Northwind Logistics",
                "St. Anne's Hospital",
                "Kestrel Labs",
                "Harbor Bank",
                "Meadowbrook High",
                "Lumen Games",
            ),
        },
        key="company",
        label="{title} at {company}",
        says=(
            "work is intense lately. I'm a {title} at {company} and we're short-staffed.",
            "I've been a {title} at {company} for about three years now.",
        ),
        changes=(
            "big news: I accepted an offer! I'm leaving {old_company} to join {company} as a "
            "{title}.",
            "today was my first day at {company}. New role as a {title}, so different from "
            "{old_company}.",
        ),
        updates=1,
        acks=(
            "That's a lot to juggle. How are you holding up?",
            "Thanks for the context, that helps me tailor my suggestions.",
        ),
        noise=(
            "My roommate got rejected from a {title} position at {company}, she's gutted.",
            "Have you heard anything about {company}? A friend is interviewing there.",
            "Is a {title} usually paid well? Just curious.",
        ),
        asks_now=(
            ("Where is the user employed at the moment?", "{company}"),
            ("What's my current job title?", "{title}"),
        ),
        asks_before=(("Which employer did the user work for originally?", "{company}"),),
        asks_history=(("What jobs has the user held, in order?", "{values}"),),
        change_event="switching jobs",
        when=(("When did the user first talk about their job?", "{month}"),),
    ),
    Kind(
        name="home",
        slots={
            "hood": (
                "Riverside",
                "Old Town",
                "Maple Heights",
                "the Docklands",
                "Greenfield",
                "Hillcrest",
                "Bayview",
            ),
            "place": (
                "a one-bedroom flat",
                "a tiny studio",
                "a terraced house",
                "a third-floor walk-up",
                "a duplex",
            ),
        },
        key="hood",
        label="{place} in {hood}",
        says=(
            "I live in {place} in {hood}, the rent is ridiculous but the area is nice.",
            "our place is {place} in {hood}, so space is tight.",
        ),
        changes=(
            "the move is done! We left {old_hood} and now we're in {place} in {hood}.",
            "we signed the lease on {place} in {hood}, moving out of {old_hood} next week.",
        ),
        updates=2,
        acks=(
            "Finding the right place is never easy. Do you like the neighborhood?",
            "Moving is exhausting, but it sounds like a good fit.",
        ),
        noise=(
            "A friend is looking at {place} in {hood}, is that area safe?",
            "There's a new bakery opening in {hood}, I might check it out.",
        ),
        asks_now=(
            ("Which neighborhood does the user currently live in?", "{hood}"),
            ("Where do I live these days?", "{hood}"),
        ),
        asks_before=(("What part of town did the user live in first?", "{hood}"),),
        asks_history=(("List every place the user has lived, in order.", "{values}"),),
        change_event="moving to {hood}",
    ),
    Kind(
        name="commute",
        slots={
            "mode": ("cycle", "take the bus", "take the train", "drive", "ride my scooter", "walk")
        },
        key="mode",
        label="{mode}",
        says=(
            "my commute is about forty minutes each way, I {mode} every day.",
            "I usually {mode} to work, it's the cheapest option.",
        ),
        changes=(
            "I've given up on the old routine: from now on I {mode} to the office instead of "
            "having to {old_mode}.",
        ),
        updates=1,
        acks=(
            "Commutes really shape the day. Do you use the time for podcasts?",
            "That seems like a sensible change.",
        ),
        noise=(
            "A study says people who {mode} to work are happier, is that true?",
            "My brother wants to {mode} to his new job but it's twenty kilometers.",
        ),
        asks_now=(("How does the user get to work nowadays?", "{mode}"),),
        asks_before=(("How did I originally travel to the office?", "{mode}"),),
        asks_history=(("How has the user's way of getting to work changed?", "{values}"),),
        change_event="changing how they commute",
    ),
    Kind(
        name="diet",
        slots={"diet": ("vegetarian", "vegan", "pescatarian", "keto", "gluten-free", "low-sugar")},
        key="diet",
        label="{diet}",
        says=(
            "I've been eating {diet} for a month and honestly I feel great.",
            "could you keep meal ideas {diet}? That's how I eat now.",
        ),
        changes=("so I quit being {old_diet}. I'm trying {diet} now, we'll see how it goes.",),
        updates=1,
        acks=(
            "Noted! I'll suggest {diet} meals from now on.",
            "Good for you for listening to your body.",
        ),
        noise=(
            "My coworker went {diet} and won't stop talking about it.",
            "Is a {diet} diet actually healthy long term? I keep seeing mixed studies.",
        ),
        asks_now=(
            ("What eating style does the user follow now?", "{diet}"),
            ("What diet am I on currently?", "{diet}"),
        ),
        asks_before=(("What did the user eat before changing their diet?", "{diet}"),),
        asks_history=(("How have my eating habits changed over time?", "{values}"),),
        change_event="changing diets",
    ),
    Kind(
        name="show",
        slots={
            "show": (
                "The Lighthouse Keepers",
                "Copper Valley",
                "Midnight Bakery",
                "Station Eleven",
                "The Long Orbit",
                "Glass Houses",
            )
        },
        key="show",
        label="{show}",
        says=(
            "I'm completely hooked on {show}, I watched four episodes last night.",
            "currently binge-watching {show}, no spoilers please!",
        ),
        changes=(
            "I finished the old one and started {show}, it's even better.",
            "I dropped {old_show}, the last season was bad. Watching {show} now.",
        ),
        updates=2,
        acks=(
            "Ha, I won't spoil anything. What do you like about it?",
            "Sounds like a great way to unwind after work.",
        ),
        noise=(
            "My sister says {show} is overrated, thoughts?",
            "I saw a billboard for {show} on the way home.",
        ),
        asks_now=(("What series is the user watching these days?", "{show}"),),
        asks_before=(("Which TV show was the user into at first?", "{show}"),),
        asks_history=(("Which shows have I been watching, in order?", "{values}"),),
        change_event="starting {show}",
    ),
    Kind(
        name="race",
        slots={
            "race": (
                "a 10K",
                "a half marathon",
                "a full marathon",
                "a sprint triathlon",
                "a 5K trail run",
            )
        },
        key="race",
        label="{race}",
        says=(
            "I registered for {race} in the spring, so I need to start training.",
            "my goal this year is to finish {race}.",
        ),
        changes=(
            "change of plans on the running front: I'm aiming for {race} instead of {old_race}.",
        ),
        updates=1,
        acks=(
            "That's a great goal! Want me to sketch a training plan?",
            "Building up gradually is key to avoiding injuries.",
        ),
        noise=(
            "The city is closing roads on Sunday for {race}.",
            "My uncle ran {race} at sixty, which is inspiring.",
        ),
        asks_now=(("What race is the user training for now?", "{race}"),),
        asks_before=(("What running event was I first planning to do?", "{race}"),),
        asks_history=(("How have the user's running goals changed?", "{values}"),),
        change_event="changing the running goal",
    ),
    Kind(
        name="trip",
        slots={
            "city": CITIES,
            "reason": (
                "a friend's wedding",
                "a work conference",
                "a week of hiking",
                "my cousin's graduation",
                "a food tour",
                "a job interview",
            ),
        },
        key="city",
        instances=3,
        label="{city}",
        says=(
            "just got back from {city}! I went for {reason} and it was amazing.",
            "I'm off to {city} tomorrow for {reason}, can't wait.",
        ),
        acks=(
            "How exciting! {city} is a great place to spend a few days.",
            "Have a wonderful time! Let me know if you need a packing list.",
        ),
        noise=(
            "My manager keeps recommending {city}, she says it's perfect for {reason}.",
            "I saw cheap flights to {city} but I don't have the vacation days.",
        ),
        asks_each=(("Why did the user travel to {city}?", "{reason}"),),
        when=(("When was the user's trip to {city}?", "{month}"),),
        asks_all=(
            ("Which places has the user visited over this period?", "{values}"),
            ("List all the cities I traveled to.", "{values}"),
        ),
        event="the trip to {city}",
    ),
    Kind(
        name="book",
        slots={
            "book": (
                "The Salt Road",
                "Quiet Engines",
                "A Map of Small Things",
                "Northern Lights",
                "The Glass Orchard",
                "Tidewater",
                "The Clockmaker's Daughter",
            ),
            "verdict": (
                "loved it",
                "found it slow",
                "cried at the ending",
                "couldn't put it down",
                "thought it was overhyped",
            ),
        },
        key="book",
        instances=3,
        label="{book}",
        says=(
            "I finished reading {book} over the weekend and {verdict}.",
            "book club pick this month was {book}. Honestly I {verdict}.",
        ),
        acks=(
            "Thanks for sharing! Want recommendations in a similar vein?",
            "It's great that you make time to read.",
        ),
        noise=(
            "Have you heard of {book}? It keeps popping up on my feed.",
            "My mom gave me {book} for my birthday but I haven't started it.",
        ),
        asks_each=(("What did the user think of {book}?", "{verdict}"),),
        asks_all=(
            ("What novels has the user finished?", "{values}"),
            ("Which books did I read?", "{values}"),
        ),
        event="reading {book}",
    ),
)

FILLERS = (
    (
        "Can you help me write a short email to {person} asking to move our meeting to {day}?",
        "Sure! Here's a draft: 'Hi {person}, would it be possible to move our meeting to {day}? "
        "Something came up on my side. Thanks for understanding!' Want it more formal?",
    ),
    (
        "What's a quick dinner I can make with {ingredient} and rice?",
        "Try a simple {ingredient} rice bowl: cook the rice, sauté the {ingredient} with garlic "
        "and a splash of soy sauce, and top with spring onions. About 25 minutes.",
    ),
    (
        "Give me three ideas for a {occasion} playlist.",
        "For a {occasion}: start with something upbeat, add a few singalongs in the middle, and "
        "finish with slower songs as the energy winds down.",
    ),
    (
        "How should I structure my week if I have a deadline on {day}?",
        "Work backwards from {day}: block the two days before for review, put the hardest work "
        "early in the week, and keep mornings free of meetings if you can.",
    ),
    (
        "Is it rude to decline an invitation from {person} by text?",
        "Not at all, as long as it's warm and prompt. Thank {person}, say you can't make it, "
        "and suggest another time if you mean it.",
    ),
    (
        "Can you make a packing list for a weekend away?",
        "Basics: two outfits, sleepwear, toiletries, chargers, a light jacket, comfortable "
        "shoes, any medication, and a book or headphones for the journey.",
    ),
    (
        "What's a good way to start budgeting?",
        "Track every expense for a month first, then set limits per category. Many people like "
        "the 50/30/20 split as a starting point.",
    ),
    (
        "Help me rephrase this so it sounds friendlier: 'Send me the {document} by {day}.'",
        "How about: 'Could you send me the {document} by {day}? Thanks so much!'",
    ),
    (
        "What's the difference between baking soda and baking powder?",
        "Baking soda needs an acid to activate; baking powder already contains one. Recipes with "
        "buttermilk or yogurt often use soda.",
    ),
    (
        "Any tips for falling asleep faster?",
        "Keep a regular schedule, dim screens an hour before bed, keep the room cool, and avoid "
        "caffeine after lunch.",
    ),
    (
        "Can you summarize the pros and cons of buying versus leasing a {item}?",
        "Buying a {item} costs more up front but you own it; leasing is cheaper monthly but "
        "comes with limits and you end up with nothing to sell.",
    ),
    (
        "Write a two-line birthday message for {person}.",
        "'Happy birthday, {person}! Wishing you a year full of good surprises and great company.'",
    ),
    (
        "How long should I boil an egg for a runny yolk?",
        "About six minutes from boiling water, then straight into cold water.",
    ),
    (
        "What should I ask in a one-on-one with my manager?",
        "Ask what they see as your priorities, where you could grow, and whether there is "
        "anything you could do to make their job easier.",
    ),
    ("Can you convert 350 degrees Fahrenheit to Celsius?", "350 °F is about 177 °C."),
    (
        "Suggest a name for a group chat about {occasion}.",
        "How about 'Operation {occasion}' or 'The {occasion} Committee'?",
    ),
    (
        "Is it worth getting a {item} warranty?",
        "Usually not: most faults show up within the manufacturer's warranty. It can make sense "
        "for expensive items you carry around a lot.",
    ),
    (
        "I need a polite way to remind {person} about money they owe me.",
        "Try: 'Hey {person}, just a gentle reminder about the money from last month. No rush, "
        "but let me know when works for you!'",
    ),
)

FILLER_SLOTS = {
    "person": ("Priya", "Tom", "Mrs. Okafor", "Jules", "Dan", "my landlord", "Sven"),
    "day": ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "next week"),
    "ingredient": ("chickpeas", "spinach", "mushrooms", "tofu", "leftover vegetables", "eggs"),
    "occasion": ("road trip", "dinner party", "study session", "housewarming", "Sunday cleaning"),
    "document": ("slides", "invoice", "report", "signed form", "budget spreadsheet"),
    "item": ("laptop", "washing machine", "phone", "bike", "TV"),
}

SMALL_TALK = (
    (
        "Ugh, it's been raining all week.",
        "Sorry to hear that. Rainy weeks can be draining, maybe a good excuse for a cozy night in?",
    ),
    ("Thanks, that was really helpful!", "Glad it helped! Anything else on your mind?"),
    ("I'm so tired today.", "That happens. Be kind to yourself and keep the evening light."),
    ("Do you ever get bored?", "Not really, every conversation is different. What's up?"),
    (
        "Tell me something interesting.",
        "Octopuses have three hearts, and two of them stop beating while they swim.",
    ),
    ("I had the best coffee this morning.", "Nice! Little things like that can make a day."),
    ("Work was chaotic today.", "Sounds stressful. Want to talk it through or switch off?"),
    (
        "Recommend a podcast?",
        "If you like stories, try a narrative history podcast; they're great for commutes.",
    ),
)

DEV = Bank(
    kinds=KINDS,
    fillers=FILLERS + SMALL_TALK,
    filler_slots=FILLER_SLOTS,
    greetings=(
        ("Hi, it's {user} again.", "Hi {user}! Good to hear from you. What's up today?"),
        ("Hey there!", "Hey! How can I help?"),
        ("Good morning!", "Good morning! What are we working on?"),
        ("Hello, got a minute?", "Of course. What do you need?"),
    ),
    wrappers=(
        "Oh, by the way, {text}",
        "Random update: {text}",
        "{text}",
        "So, {text}",
        "Before I forget, {text}",
    ),
    noise_replies=(
        "Interesting! Tell me more if you like.",
        "Ha, that's funny. Anything I can help with?",
        "Good question. It depends a lot on the situation.",
        "I see. Small world sometimes!",
    ),
    first_names=("Ana", "Ben", "Chloe", "Dev", "Elif", "Femi", "Greta", "Hugo", "Ines", "Jonas"),
)
