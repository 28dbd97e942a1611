"""The held-out bank: hobbies, gear, money and home projects (no word list, fact kind
or question phrasing in common with the dev bank)."""

from __future__ import annotations

from kinds import Bank, Kind

VENUES = (
    "the Roundhouse",
    "Crescent Hall",
    "the Old Mill",
    "Pier 9",
    "the Velvet Room",
    "Union Chapel",
)

KINDS = (
    Kind(
        name="bicycle",
        slots={
            "bike": (
                "a steel touring frame",
                "a carbon road racer",
                "a folding commuter",
                "a cargo e-bike",
                "a vintage Peugeot",
                "a gravel bike",
            ),
            "color": ("teal", "matte black", "burnt orange", "cream", "forest green"),
        },
        key="bike",
        says=(
            "I treated myself: {bike}, {color}, secondhand but barely ridden.",
            "picked up {bike} from a seller across town, it's {color} and gorgeous.",
        ),
        acks=(
            "Nice find! Secondhand is the smart way to buy. Check the chain and brake pads.",
            "Enjoy the rides! Make sure to get a decent lock.",
        ),
        noise=(
            "Someone locked {bike} to our railing and it's been there a month.",
            "Saw {bike} in {color} in a shop window today, the price was absurd.",
        ),
        asks=(
            ("What sort of two-wheeler did they purchase?", "{bike}"),
            ("Which color is my bicycle?", "{color}"),
        ),
        event="buying the bike",
        when=(("Around when did I buy my bicycle?", "{month}"),),
    ),
    Kind(
        name="language",
        slots={
            "language": ("Japanese", "Portuguese", "Swahili", "Korean", "Icelandic", "Greek"),
            "why": (
                "my partner's family speaks it",
                "we're relocating next year",
                "I want to read novels in the original",
                "my grandmother spoke it",
            ),
        },
        key="language",
        says=(
            "I enrolled in an evening {language} course, mainly because {why}.",
            "Duolingo streak day 40! Studying {language} since {why}.",
        ),
        acks=(
            "That's a great motivation. Immersion through podcasts helps a lot.",
            "Impressive consistency! Want some phrases to practice?",
        ),
        noise=(
            "The {language} restaurant downtown has a menu I can't read at all.",
            "Is {language} grammar hard for English speakers?",
        ),
        asks=(
            ("Which foreign tongue is this person studying?", "{language}"),
            ("Why did I decide to learn a new language?", "{why}"),
        ),
        event="starting the language course",
        when=(("When did they begin studying a language?", "{month}"),),
    ),
    Kind(
        name="volunteer",
        slots={
            "org": (
                "the food bank",
                "an animal rescue",
                "the public library",
                "a community garden",
                "a hospice",
                "a literacy charity",
            ),
            "day": (
                "Saturday mornings",
                "Tuesday evenings",
                "every other Sunday",
                "Wednesday lunchtimes",
            ),
        },
        key="org",
        says=(
            "I started volunteering at {org}, {day}. It's very grounding.",
            "signed up to help at {org} on {day}, first shift went well.",
        ),
        acks=(
            "That's really generous of you. What do you do there?",
            "Giving time like that makes a real difference.",
        ),
        noise=(
            "{org} near us is asking for donations again.",
            "My boss volunteers at {org} on {day}, apparently.",
        ),
        asks=(
            ("Where does this person give their time for free?", "{org}"),
            ("On which days do I do my volunteer shift?", "{day}"),
        ),
        event="starting to volunteer",
        when=(("When did they take up volunteering?", "{month}"),),
    ),
    Kind(
        name="fear",
        slots={"fear": ("heights", "deep water", "flying", "spiders", "crowds", "needles")},
        key="fear",
        says=(
            "confession: I'm terrified of {fear}, always have been.",
            "I had a panic moment today, {fear} really gets to me.",
        ),
        acks=(
            "That's very common, and nothing to be embarrassed about.",
            "Thanks for trusting me with that. Gradual exposure can help.",
        ),
        noise=(
            "There's a documentary about people who love {fear}, can you imagine?",
            "My kid said she's scared of {fear}, how do I reassure her?",
        ),
        asks=(
            ("What phobia does this person have?", "{fear}"),
            ("What am I afraid of?", "{fear}"),
        ),
        event="admitting the phobia",
    ),
    Kind(
        name="laptop",
        slots={
            "laptop": (
                "a ThinkPad X1",
                "a MacBook Air",
                "a Framework 13",
                "a Dell XPS",
                "a Surface Laptop",
                "a Chromebook",
            )
        },
        key="laptop",
        label="{laptop}",
        says=(
            "I do all my design work on {laptop}, it's getting slow though.",
            "my daily machine is {laptop}.",
        ),
        changes=(
            "replaced {old_laptop} at last, I'm typing this on {laptop}.",
            "the old one died, so I went for {laptop}.",
        ),
        updates=2,
        acks=(
            "Good choice for what you do. Did you migrate your files already?",
            "New hardware always feels great for the first month.",
        ),
        noise=(
            "A coworker spilled tea on {laptop} today, total loss.",
            "Are the keyboards on {laptop} any good? Asking for my dad.",
        ),
        asks_now=(
            ("What computer does this person use now?", "{laptop}"),
            ("What's my current notebook model?", "{laptop}"),
        ),
        asks_before=(("Which machine did they have originally?", "{laptop}"),),
        asks_history=(("Every computer I've mentioned owning, in order?", "{values}"),),
        change_event="getting {laptop}",
    ),
    Kind(
        name="manager",
        slots={
            "boss": ("Ingrid", "Marcus", "Yusuf", "Delphine", "Kenji", "Rosa"),
            "style": (
                "micromanages everything",
                "is super hands-off",
                "is a great mentor",
                "cancels every one-on-one",
            ),
        },
        key="boss",
        label="{boss}",
        says=(
            "my manager {boss} {style}, which is a lot.",
            "reporting to {boss} these days; honestly {boss} {style}.",
        ),
        changes=("reorg happened: {old_boss} is out and my new lead is {boss}, who {style}.",),
        updates=1,
        acks=(
            "Your relationship with your manager shapes so much of work.",
            "That sounds like an adjustment. How are you feeling about it?",
        ),
        noise=(
            "My friend's boss {boss} {style}, poor thing.",
            "Is it normal for a team lead to be someone who {style}?",
        ),
        asks_now=(("Who is this person's supervisor at the moment?", "{boss}"),),
        asks_before=(("Whom did I report to before the reorganization?", "{boss}"),),
        asks_history=(("Who have their bosses been, in order?", "{values}"),),
        change_event="the reorg",
    ),
    Kind(
        name="pastime",
        slots={
            "pastime": (
                "pottery",
                "bouldering",
                "sourdough baking",
                "birdwatching",
                "woodworking",
                "salsa dancing",
            )
        },
        key="pastime",
        label="{pastime}",
        says=(
            "weekends are all about {pastime} for me right now.",
            "I've gotten really into {pastime}, it's my way to switch off.",
        ),
        changes=(
            "I've lost interest in {old_pastime}. My new obsession is {pastime}.",
            "swapped hobbies: {pastime} is my thing now.",
        ),
        updates=2,
        acks=(
            "That sounds like a lovely way to spend free time.",
            "Having a hands-on hobby is great for the mind.",
        ),
        noise=(
            "A {pastime} studio opened near the station.",
            "My aunt has done {pastime} for thirty years.",
        ),
        asks_now=(
            ("How does this person spend their free time lately?", "{pastime}"),
            ("What's my hobby at present?", "{pastime}"),
        ),
        asks_before=(("What leisure activity were they into first?", "{pastime}"),),
        asks_history=(("Trace how their hobbies evolved.", "{values}"),),
        change_event="picking up {pastime}",
    ),
    Kind(
        name="savings",
        slots={
            "amount": ("2,000", "5,000", "12,000", "800", "20,000"),
            "goal": (
                "a deposit on a flat",
                "a sabbatical",
                "a new kitchen",
                "an emergency fund",
                "a used van",
            ),
        },
        key="goal",
        label="{goal}",
        says=(
            "I'm putting money aside, target is {amount} for {goal}.",
            "budget goal for the year: save {amount} toward {goal}.",
        ),
        changes=("rethinking my finances: forget {old_goal}, I'm now saving {amount} for {goal}.",),
        updates=1,
        acks=(
            "A concrete target makes saving much easier. Automate the transfers if you can.",
            "Good plan. Want help setting up a monthly budget?",
        ),
        noise=(
            "My cousin spent {amount} on {goal} and regrets it.",
            "Is {amount} a realistic amount for {goal}?",
        ),
        asks_now=(("What is this person currently putting money away for?", "{goal}"),),
        asks_before=(("What was my original savings target for?", "{goal}"),),
        asks_history=(("How did their savings plans change?", "{values}"),),
        change_event="changing the savings goal",
    ),
    Kind(
        name="wake",
        slots={"wake": ("5:30", "6:00", "6:45", "7:30", "8:15")},
        key="wake",
        label="{wake}",
        says=(
            "my alarm goes off at {wake} every day, no exceptions.",
            "I get up at {wake}, which gives me a quiet hour before everyone.",
        ),
        changes=("new routine: I'm waking at {wake} instead of {old_wake}.",),
        updates=1,
        acks=(
            "Consistency is the best thing for sleep quality.",
            "Morning routines are so personal. Does it work for you?",
        ),
        noise=(
            "My neighbor's alarm rings at {wake} and the walls are thin.",
            "Is {wake} too early to call someone?",
        ),
        asks_now=(("At what hour does this person rise nowadays?", "{wake}"),),
        asks_before=(("What time did I use to get up?", "{wake}"),),
        asks_history=(("How has their morning schedule shifted?", "{values}"),),
        change_event="the new morning routine",
    ),
    Kind(
        name="planting",
        slots={
            "plant": (
                "tomatoes",
                "lavender",
                "sunflowers",
                "runner beans",
                "dahlias",
                "strawberries",
                "courgettes",
                "basil",
            ),
            "spot": (
                "the balcony",
                "the back fence",
                "a raised bed",
                "the windowsill",
                "the allotment",
            ),
        },
        key="plant",
        instances=3,
        label="{plant}",
        says=(
            "planted {plant} along {spot} this weekend, fingers crossed.",
            "{plant} went in today, in {spot}.",
        ),
        acks=(
            "Lovely! Keep the soil moist for the first couple of weeks.",
            "Gardening is so satisfying. Watch out for slugs.",
        ),
        noise=(
            "The supermarket {plant} are so sad compared to homegrown.",
            "My neighbor grows {plant} in {spot}, they're thriving.",
        ),
        asks_each=(("Where in the garden did they put the {plant}?", "{spot}"),),
        when=(("When did I plant the {plant}?", "{month}"),),
        asks_all=(
            ("What has this person grown in their garden?", "{values}"),
            ("Everything I've planted, please?", "{values}"),
        ),
        event="planting the {plant}",
    ),
    Kind(
        name="gig",
        slots={
            "artist": (
                "Nova Static",
                "the Paper Foxes",
                "Amara Quist",
                "Low Tide Choir",
                "DJ Kettle",
                "the Hollow Pines",
            ),
            "venue": VENUES,
        },
        key="artist",
        instances=3,
        label="{artist}",
        says=(
            "saw {artist} live at {venue} last night, still buzzing.",
            "got tickets for {artist} at {venue}, the show was unreal.",
        ),
        acks=(
            "Live music is the best. Was it loud?",
            "Sounds like a fantastic night out!",
        ),
        noise=(
            "{artist} announced a tour but not in our city, typical.",
            "{venue} is closing for renovations apparently.",
        ),
        asks_each=(("Where did the person watch {artist} perform?", "{venue}"),),
        asks_all=(
            ("Which acts has this person seen in concert?", "{values}"),
            ("What bands and performers did I see live?", "{values}"),
        ),
        event="the {artist} concert",
    ),
)

FILLERS = (
    (
        "My Python script says 'KeyError: {key}', what does that mean?",
        "It means the dictionary has no entry '{key}'. Use dict.get('{key}') or check "
        "`if '{key}' in data` before reading it.",
    ),
    (
        "Write a haiku about {thing}.",
        "Here's one: '{thing} at dusk / a hush settles on the street / the kettle murmurs.'",
    ),
    (
        "How do I fix a squeaky {fixture}?",
        "Most squeaks come from friction: tighten the screws, then add a little silicone "
        "lubricant to the moving parts of the {fixture}.",
    ),
    ("Help my kid with this: what is 3/4 plus 1/6?", "Common denominator 12: 9/12 + 2/12 = 11/12."),
    (
        "Who was Ada Lovelace?",
        "A 19th-century mathematician who wrote what's considered the first computer program, "
        "for Babbage's Analytical Engine.",
    ),
    (
        "Translate 'where is the train station' into {tongue}.",
        "I'd double-check with a native speaker, but a common phrasing in {tongue} is easy to "
        "find in any phrasebook; want me to spell it phonetically?",
    ),
    (
        "Give me a bullet-point agenda for a {meeting}.",
        "1) Goals for the {meeting}, 2) updates, 3) blockers, 4) decisions needed, 5) next "
        "steps and owners.",
    ),
    (
        "What's a good stretching routine after sitting all day?",
        "Try hip flexor lunges, a doorway chest stretch, cat-cow and neck rolls, 30 seconds each.",
    ),
    (
        "Is it better to paint a {fixture} with gloss or matte?",
        "Gloss is tougher and easier to wipe clean; matte hides imperfections. For a {fixture} "
        "that gets handled a lot, satin is a good compromise.",
    ),
    (
        "Can you explain what an index fund is?",
        "A fund that buys every stock in an index, like the S&P 500, so you get the market's "
        "return with low fees.",
    ),
    (
        "Draft a resignation letter opening line.",
        "'Please accept this letter as formal notice of my resignation, effective two weeks from "
        "today.'",
    ),
    ("How many tablespoons are in a cup?", "There are 16 tablespoons in a US cup."),
    (
        "Suggest a board game for {count} people.",
        "For {count} players, a cooperative game is fun, or a quick party game if people "
        "haven't played much.",
    ),
    (
        "What does 'idempotent' mean?",
        "An operation is idempotent if doing it twice has the same effect as doing it once.",
    ),
    (
        "My {thing} photos look washed out, any tips?",
        "Lower the exposure a little, shoot in the early morning or late afternoon, and avoid "
        "pointing straight at the light.",
    ),
    (
        "Rewrite this to sound more confident: 'I think maybe we could try {idea}.'",
        "'Let's try {idea}.' Short and direct works best.",
    ),
)

FILLER_SLOTS = {
    "key": ("'user_id'", "'price'", "'timestamp'", "'config'", "'name'"),
    "thing": ("autumn rain", "a harbor", "city lights", "snow", "a quiet kitchen"),
    "fixture": ("door hinge", "cabinet door", "floorboard", "window frame", "desk chair"),
    "tongue": ("French", "German", "Italian", "Dutch", "Turkish"),
    "meeting": ("team retro", "planning session", "kickoff", "budget review"),
    "count": ("three", "four", "six", "eight"),
    "idea": ("a shorter sprint", "a new onboarding doc", "weekly demos", "pair reviews"),
}

SMALL_TALK = (
    ("It's freezing here today.", "Stay warm! A hot drink and thick socks go a long way."),
    ("Cheers, that did the trick.", "Happy to help. What's next?"),
    (
        "I can't focus at all this afternoon.",
        "Try a 25-minute timer on one small task, then a short break.",
    ),
    ("What's your favorite color?", "I don't have one, but I hear teal is having a moment."),
    ("Tell me a fun fact.", "Honey never spoils: edible honey was found in ancient tombs."),
    ("Long day.", "Those happen. Anything you want to offload?"),
    (
        "Any good stand-up specials lately?",
        "I can't keep up with releases, but I can suggest classic specials if you like.",
    ),
)

HELDOUT = Bank(
    kinds=KINDS,
    fillers=FILLERS + SMALL_TALK,
    filler_slots=FILLER_SLOTS,
    greetings=(
        ("Hiya, {user} here.", "Hi {user}! What can I do for you?"),
        ("Morning.", "Morning! How's it going?"),
        ("Quick question for you.", "Sure, go ahead."),
        ("I'm back!", "Welcome back! What's new?"),
    ),
    wrappers=(
        "Fun fact about me: {text}",
        "{text}",
        "Update on my life: {text}",
        "Side note, {text}",
        "Not that you asked, but {text}",
    ),
    noise_replies=(
        "Huh, that's interesting.",
        "Good to know! Anything else?",
        "That's a tricky one, it depends.",
        "Ha, life is funny like that.",
    ),
    first_names=(
        "Kofi",
        "Lena",
        "Mateo",
        "Noor",
        "Oskar",
        "Pilar",
        "Quinn",
        "Rhea",
        "Sami",
        "Tove",
    ),
)
