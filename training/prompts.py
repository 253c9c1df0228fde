"""The distillation prompt set: topics x task templates, seeded, with whole topics held out.

Shared by the draft distillation (training/distill.py), the EAGLE head training (training/eagle.py) and
the agreement analysis. The engine's benchmark reads the held-out prompts from
assets/heldout_prompts.json, which `python -m training.prompts --write` regenerates from this module (a
test checks the two agree), so the runtime never imports training code.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

HELDOUT_ASSET = Path(__file__).resolve().parent.parent / "assets" / "heldout_prompts.json"
HELDOUT_FORMAT = "speclab.heldout_prompts/1"

TOPICS = [
    # science and nature
    "photosynthesis", "black holes", "the water cycle", "volcanoes", "earthquakes", "the immune system",
    "DNA", "evolution", "climate change", "the solar system", "gravity", "electricity", "magnetism",
    "the human heart", "sleep", "bees", "coral reefs", "rainforests", "deserts", "the ocean tides",
    "vaccines", "antibiotics", "the moon", "rainbows", "clouds", "dinosaurs", "whales", "mushrooms",
    "the periodic table", "atoms", "light", "sound waves", "friction", "batteries", "nuclear energy",
    "solar panels", "wind turbines", "recycling", "plastic pollution", "bird migration",
    # technology
    "the internet", "smartphones", "artificial intelligence", "machine learning", "computer viruses",
    "passwords", "cloud computing", "databases", "the Python programming language", "web browsers",
    "email", "GPS", "electric cars", "3D printing", "robots", "video games", "social media",
    "open source software", "encryption", "spreadsheets", "search engines", "drones", "virtual reality",
    # everyday life
    "cooking pasta", "baking bread", "making coffee", "brewing tea", "gardening", "growing tomatoes",
    "house plants", "saving money", "budgeting", "running", "yoga", "swimming", "cycling", "hiking",
    "camping", "packing for a trip", "learning a new language", "studying for exams", "time management",
    "public speaking", "job interviews", "writing a resume", "moving to a new city", "adopting a dog",
    "caring for a cat", "keeping fish", "cleaning the kitchen", "decluttering", "healthy breakfast",
    "drinking enough water", "stress", "making friends", "birthday parties", "remote work",
    # history, society, culture
    "the Roman Empire", "ancient Egypt", "the printing press", "the Industrial Revolution",
    "the first airplane", "the Moon landing", "the Olympic Games", "democracy", "taxes", "money",
    "inflation", "supply and demand", "libraries", "museums", "jazz", "classical music", "painting",
    "photography", "poetry", "theatre", "chess", "football", "basketball", "the Silk Road", "castles",
    "pirates", "trains", "bridges", "skyscrapers", "maps", "calendars", "clocks", "the alphabet",
    # places and things
    "Paris", "Tokyo", "the Amazon river", "Mount Everest", "Antarctica", "the Sahara", "islands",
    "lighthouses", "farms", "cities at night", "a small village", "a busy market", "an old bookshop",
    "a train station", "a rainy afternoon", "winter", "autumn leaves", "the night sky", "a thunderstorm",
    "a lost key", "a red umbrella", "a paper boat", "a robot cat", "a friendly dragon", "a tiny spaceship",
]

TASKS = [
    ("explain", "Explain {topic} in simple terms."),
    ("explain_child", "Explain {topic} to a ten-year-old."),
    ("what_is", "What is {topic}?"),
    ("why", "Why does {topic} matter?"),
    ("facts", "Give me three interesting facts about {topic}."),
    ("list", "List five things everyone should know about {topic}."),
    ("story", "Write a short story about {topic}."),
    ("poem", "Write a short poem about {topic}."),
    ("howto", "How do I get started with {topic}? Give step-by-step instructions."),
    ("tips", "What are some practical tips related to {topic}?"),
    ("compare", "Compare {topic} and {other}."),
    ("pros_cons", "What are the pros and cons of {topic}?"),
    ("email", "Write a short email to a friend about {topic}."),
    ("summary", "Summarise the main ideas of {topic} in one paragraph."),
    ("question", "I have a question: what is the most common misconception about {topic}?"),
    ("history", "Tell me briefly about the history of {topic}."),
    ("describe", "Describe {topic} in a few sentences."),
    ("quiz", "Write three quiz questions about {topic} with answers."),
    ("lesson", "Outline a short lesson plan for teaching {topic}."),
    ("tweet", "Write a cheerful social media post about {topic}."),
    ("dialogue", "Write a short dialogue between two people talking about {topic}."),
    ("future", "How might {topic} change in the next twenty years?"),
    ("mistakes", "What mistakes do beginners make with {topic}?"),
    ("analogy", "Explain {topic} using an everyday analogy."),
    ("summarise_para", "Summarise this paragraph in one sentence: {paragraph}"),
    ("title", "Suggest five titles for an article about {topic}."),
]

# A second round of prompts (`--extended-prompts`): new subjects and new kinds of request, for more and more
# varied distillation data. They come after the first round in the training list, so the first round's
# shards stay valid, and every 10th new topic is held out as before.
MORE_TOPICS = [
    "glaciers", "hurricanes", "the northern lights", "fossils", "octopuses", "ants", "wolves", "elephants",
    "penguins", "butterflies", "seeds", "soil", "rivers", "caves", "the speed of light", "telescopes",
    "microscopes", "germs", "the brain", "muscles", "bones", "vitamins", "allergies", "the seasons",
    "weather forecasts", "compost", "bicycles", "submarines", "rockets", "satellites", "the Mars rovers",
    "keyboards", "computer memory", "operating systems", "programming bugs", "version control", "chatbots",
    "online shopping", "podcasts", "streaming music", "digital cameras", "printers", "Wi-Fi", "QR codes",
    "knitting", "woodworking", "painting a room", "fixing a flat tyre", "planning a wedding", "first aid",
    "fire safety", "meditation", "journaling", "reading habits", "board games", "card tricks", "origami",
    "learning to draw", "playing the guitar", "singing in a choir", "making pizza", "making soup",
    "chocolate", "cheese", "spices", "street food", "picnics", "vegetable gardens", "beekeeping",
    "the Vikings", "ancient Greece", "the Renaissance", "the Great Wall of China", "medieval knights",
    "the telephone", "the steam engine", "newspapers", "the postal service", "banks", "insurance",
    "voting", "human rights", "city parks", "public transport", "traffic lights", "recycling centres",
    "a lighthouse keeper", "a haunted house", "a talking tree", "a clockmaker's shop", "a snowy mountain cabin",
    "a desert oasis", "a floating city", "a secret garden", "an underwater kingdom", "a lost puppy",
    "a school science fair", "a first day at a new job", "a long train journey", "a summer festival",
]

MORE_TASKS = [
    ("steps", "What are the steps involved in {topic}?"),
    ("beginner_guide", "Write a beginner's guide to {topic} in a few short paragraphs."),
    ("faq", "Write a short FAQ about {topic} with three questions and answers."),
    ("myths", "What are two common myths about {topic}, and what is the truth?"),
    ("letter", "Write a short letter to a teacher about {topic}."),
    ("advice", "My friend is curious about {topic}. What advice would you give them?"),
    ("story_child", "Tell a bedtime story for a child about {topic}."),
    ("definition", "Define {topic} in one sentence, then give an example."),
    ("importance", "Explain why {topic} is important for everyday life."),
    ("similar", "What is the difference between {topic} and {other}?"),
    ("plan", "Make a simple one-week plan for learning about {topic}."),
    ("haiku", "Write a haiku about {topic}."),
    ("news", "Write a short news report about {topic}."),
    ("keywords", "List the key terms someone should know about {topic}, with a short definition of each."),
]

# A third round (`--prompt-rounds 3`): 100 more subjects with every task of the first two rounds, appended
# after the second so its shards stay valid too.
THIRD_TOPICS = [
    "sharks", "jellyfish", "owls", "frogs", "spiders", "dolphins", "tigers", "horses", "camels", "pandas",
    "earthworms", "tornadoes", "lightning", "snowflakes", "tsunamis", "the Milky Way", "comets", "eclipses",
    "the human eye", "digestion", "the lungs", "blood", "fever", "exercise", "nutrition labels", "sugar",
    "salt", "bread yeast", "fermentation", "rust", "magnets in everyday life", "glass", "paper", "cotton",
    "calculators", "spreadsheets for beginners", "websites", "smart watches",
    "electric scooters", "solar cookers", "water filters", "refrigerators", "microwave ovens",
    "sewing", "pottery", "candle making", "photographing birds", "bird watching", "fishing", "kayaking",
    "rock climbing", "ice skating", "skiing", "tennis", "table tennis", "marathons", "stretching",
    "making pancakes", "making salad", "rice", "noodles", "tea ceremonies", "family dinners", "potluck parties",
    "sharing a flat", "neighbours", "volunteering", "charity", "recycling at home", "saving energy at home",
    "ancient Rome's roads", "the Aztecs", "the Incas", "the Egyptian pyramids", "the Wright brothers",
    "the light bulb", "radio", "television", "cinema", "comic books", "libraries of the future", "schools",
    "homework", "exams", "teachers", "friendship", "kindness", "patience", "curiosity", "courage",
    "a mysterious letter", "a magic paintbrush", "a robot gardener", "a sleepy bear", "a brave little mouse",
    "a kite on a windy day", "a bakery at dawn", "a city without cars", "a map to hidden treasure",
    "a visit to grandma",
]

# A fourth round (`--prompt-rounds 4`): 100 more subjects again, every task, appended after the third.
FOURTH_TOPICS = [
    "bats", "bees in winter", "snails", "crows", "koalas", "fog", "deserts at night", "wetlands",
    "the Moon's phases", "Saturn's rings", "shooting stars", "teeth", "hearing", "hand washing", "breakfast",
    "drinking water", "soup", "baking cookies", "houseplants", "composting", "ferries", "hot air balloons",
    "elevators", "tunnels", "email etiquette", "video calls", "puzzles", "magic tricks", "juggling", "drawing",
    "choirs", "drums", "the violin", "zoos", "aquariums", "theme parks", "hiking boots", "packing a suitcase",
    "moving house", "first jobs", "birthdays", "weddings", "holidays abroad", "learning a language",
    "the first computers", "a lost umbrella", "a talking cat", "a dragon who loves books", "a train to the stars",
    "an old lighthouse keeper", "a snowman in spring", "a garden on the roof", "a clock that runs backwards",
    "seahorses", "hedgehogs", "parrots", "giraffes", "beavers", "butterflies in spring", "ladybirds", "squirrels",
    "polar bears", "mushrooms in the forest", "sand dunes", "waterfalls", "hail", "the tides", "mountain lakes",
    "Mars rovers", "black holes for children", "the Sun's energy", "the skin", "sneezing", "walking to school",
    "packed lunches", "olive oil", "honey", "popcorn", "dumplings", "smoothies", "pizza at home", "scarecrows",
    "greenhouses", "wind chimes", "door locks", "zippers", "umbrellas", "bus timetables", "road signs",
    "postcards", "stamps", "the post office", "fire stations", "hospitals at night", "pharmacies", "dentists",
    "hairdressers", "markets", "lemonade stands", "school trips",
]

# A fifth round (`--prompt-rounds 5`): 98 more subjects, every task, appended after the fourth. Generated on
# its own (`--gen-from-round 5`) to continue the shipped drafters on new data without regenerating rounds 1-4.
FIFTH_TOPICS = [
    "otters", "flamingos", "woodpeckers", "sea turtles", "hummingbirds", "moles", "foxes in the city",
    "goldfish", "tadpoles", "moths", "icebergs", "quicksand", "geysers", "coral atolls", "mangroves",
    "the ozone layer", "meteorites", "the International Space Station", "astronaut food", "Jupiter's moons",
    "fingerprints", "yawning", "hiccups", "goosebumps", "memory and sleep", "eyeglasses", "crutches",
    "sunscreen", "bicycle helmets", "seat belts", "vending machines", "escalators", "barcodes",
    "credit cards", "pocket money", "piggy banks", "shopping lists", "receipts", "price tags", "auctions",
    "origami cranes", "paper planes", "sandcastles", "treehouses", "snow forts", "kites", "marbles",
    "hide and seek", "spelling bees", "science museums", "planetariums", "botanical gardens", "night markets",
    "farmers' markets", "food trucks", "bakeries", "ice cream", "jam making", "pickles", "porridge",
    "sandwiches", "lentils", "chopsticks", "table manners", "thank-you notes", "apologising", "sharing toys",
    "sibling rivalry", "grandparents' stories", "family photo albums", "pen pals", "homework clubs",
    "school uniforms", "recess", "the school library", "class pets", "lost and found", "the first snow",
    "a power cut", "a windy beach", "a spring flood", "a quiet forest path", "a rooftop at sunset",
    "a ship in a bottle", "a broken compass", "a wishing well", "a forgotten key", "a tiny dragon",
    "a robot that learns to paint", "a cloud that cannot rain", "a library that never closes",
    "a postman on Mars", "a penguin who wants to fly", "a bridge made of light", "a shy ghost",
    "a village of inventors", "an island of clocks", "a market on the moon",
]

# A sixth round (`--prompt-rounds 6`): 100 more subjects, every task, after the fifth (`--gen-from-round 6`).
SIXTH_TOPICS = [
    "swans", "lizards", "hamsters", "ravens", "walruses", "starfish", "crabs", "peacocks", "llamas", "zebras",
    "river otters", "monsoons", "avalanches", "sunsets", "dew", "frost", "sandstorms", "the equator",
    "the North Pole", "time zones", "leap years", "the calendar of the Maya", "sundials", "hourglasses",
    "compasses", "anchors", "sailboats", "canals", "windmills", "water wheels", "dams", "aqueducts",
    "bricks", "concrete", "nails and screws", "glue", "rope", "buttons", "socks", "raincoats", "wool",
    "silk", "denim", "shoe laces", "backpacks", "notebooks", "pencils", "erasers", "crayons", "chalkboards",
    "rulers", "typewriters", "fax machines", "pagers", "radios in cars", "headphones", "loudspeakers",
    "microphones", "remote controls", "light switches", "smoke alarms", "thermometers", "barometers",
    "weather vanes", "rain gauges", "bird feeders", "nest boxes", "pond life", "rock pools", "seashells",
    "pebbles", "crystals", "volcanic glass", "gold mining", "salt mines", "coal", "oil lamps", "candles",
    "street lamps", "night buses", "taxis", "ambulances", "tow trucks", "garbage trucks", "tractors",
    "combine harvesters", "orchards", "vineyards", "olive groves", "rice paddies", "tea plantations",
    "a lighthouse in a storm", "a kitten in a shoebox", "a giant who tends gardens", "a snail's long journey",
    "a music box that sings at night", "a boat made of leaves", "a city under the snow",
    "a message in a bottle", "a picnic in the rain",
]

PARAGRAPH_TEMPLATES = [
    "Many people find {topic} fascinating. Researchers and hobbyists have studied it for years, and new "
    "ideas keep appearing. Some say the basics are easy to learn, while others argue that real "
    "understanding takes patience and practice.",
    "Last week our town held a small event about {topic}. Volunteers set up tables, children asked "
    "questions, and an expert gave a short talk. By the evening, everyone agreed they had learned "
    "something new and wanted to come back next year.",
    "{topic_cap} has changed a lot over time. What started as a simple idea became something that "
    "affects millions of lives. Today, people debate how to use it wisely and what its future should be.",
]


def build_prompts(seed: int = 0, heldout_every: int = 10, topics=None, tasks=None, extended: bool = False,
                  rounds: int = 1) -> dict:
    """Every topic x task combination, seeded and shuffled; every `heldout_every`-th topic is held out.

    Returns {"train": [{prompt, topic, task}], "heldout": [...]}. Held-out topics never appear in training,
    so the held-out acceptance measures generalisation to new subjects, not memorised answers.

    `rounds` 2 (or `extended`) appends a second round after the first (so a first round already generated
    stays valid): MORE_TOPICS with every task, and the first round's training topics with MORE_TASKS.
    `rounds` 3 appends a third after that: THIRD_TOPICS with every task of both rounds; `rounds` 4 a fourth:
    FOURTH_TOPICS with every task; `rounds` 5 a fifth: FIFTH_TOPICS with every task; `rounds` 6 a sixth.
    """
    if not 1 <= rounds <= 6:
        raise ValueError(f"rounds must be 1 to 6; got {rounds}")
    rounds = max(rounds, 2 if extended else 1)
    topics = list(TOPICS if topics is None else topics)
    tasks = list(TASKS if tasks is None else tasks)
    rng = random.Random(seed)
    out = {"train": [], "heldout": [], "heldout_topics": []}

    def add_round(round_topics, pairs, tag=None):
        every = heldout_every if heldout_every > 0 else len(round_topics) + 1
        held = set(round_topics[every - 1 :: every])
        train, heldout = [], []
        for topic, (task, template) in pairs:
            pool = round_topics if topic in round_topics else topics
            ti = pool.index(topic)
            other = pool[(ti + 1 + rng.randrange(len(pool) - 1)) % len(pool)]
            paragraph = rng.choice(PARAGRAPH_TEMPLATES).format(topic=topic, topic_cap=topic[:1].upper() + topic[1:])
            row = {"prompt": template.format(topic=topic, other=other, paragraph=paragraph), "topic": topic, "task": task}
            if tag:
                row.update(tag)
            (heldout if topic in held else train).append(row)
        rng.shuffle(train)
        rng.shuffle(heldout)
        out["train"] += train
        out["heldout"] += heldout
        out["heldout_topics"] = sorted(set(out["heldout_topics"]) | held)

    add_round(topics, [(t, k) for t in topics for k in tasks])
    if rounds >= 2:
        first_train = [t for t in topics if t not in out["heldout_topics"]]
        more_topics = [t for t in MORE_TOPICS if t not in topics]
        add_round(more_topics, [(t, k) for t in more_topics for k in tasks + MORE_TASKS]
                  + [(t, k) for t in first_train for k in MORE_TASKS], tag={"round": 2})
    seen = set(topics) | set(MORE_TOPICS)
    for number, round_topics in enumerate((THIRD_TOPICS, FOURTH_TOPICS, FIFTH_TOPICS, SIXTH_TOPICS)[: max(rounds - 2, 0)], start=3):
        new = [t for t in round_topics if t not in seen]  # rounds 3-6: new topics x every task
        add_round(new, [(t, k) for t in new for k in tasks + MORE_TASKS], tag={"round": number})
        seen.update(new)
    return out


def heldout_eval_prompts(heldout: list[dict], n: int) -> list[str]:
    """n held-out prompts, round-robin over the held-out topics so every topic is represented. Only the
    first round's (no "round": 2 key), so the evaluation stays the same when `--extended-prompts` adds more."""
    by_topic: dict[str, list[str]] = {}
    for row in heldout:
        if row.get("round", 1) != 1:
            continue
        by_topic.setdefault(row["topic"], []).append(row["prompt"])
    out, i = [], 0
    topics = sorted(by_topic)
    while len(out) < n and any(by_topic.values()):
        lst = by_topic[topics[i % len(topics)]]
        if lst:
            out.append(lst.pop())
        i += 1
    return out


def heldout_asset() -> dict:
    """The contents of assets/heldout_prompts.json: every first-round held-out prompt, in the round-robin
    order `heldout_eval_prompts` takes them (so its first n are the engine benchmark's n held-out prompts)."""
    heldout = build_prompts(seed=0)["heldout"]
    return {
        "format": HELDOUT_FORMAT,
        "about": "Prompts on topics the shipped drafters never saw in training (every 10th topic held out), "
                 "round-robin over those topics. Written by `python -m training.prompts --write`.",
        "prompts": heldout_eval_prompts(heldout, len(heldout)),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m training.prompts", description=__doc__.splitlines()[0])
    p.add_argument("--write", action="store_true", help=f"(re)write {HELDOUT_ASSET.name} in assets/")
    args = p.parse_args(argv)
    data = heldout_asset()
    if args.write:
        HELDOUT_ASSET.write_text(json.dumps(data, indent=1) + "\n")
        print(f"wrote {len(data['prompts'])} held-out prompts to {HELDOUT_ASSET}")
    else:
        print(f"{len(data['prompts'])} held-out prompts; --write to store them in {HELDOUT_ASSET}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
