"""Instructions of the kinds the page offers and users type, beside data.py's explanations: code, lists,
arithmetic, other languages, dialogue and long answers (issue 46: the head drafted these worst, having seen few).

Each kind is composed from its own parts, so that it holds hundreds to thousands of distinct instructions; the
benchmark's prompts (assets/prompts/kinds.json) and the held-out prompts are never composed (tests pin it)."""
import itertools
import json
import random
from pathlib import Path

from .data import TOPICS

KINDS_FILE = Path(__file__).resolve().parent.parent / "assets" / "prompts" / "kinds.json"

LANGUAGES = ["Python", "JavaScript", "C", "Rust", "Go", "Java", "Ruby", "TypeScript"]
CODE_TASKS = [
    "reverses a string", "counts the vowels in a sentence", "returns the largest number in a list",
    "checks whether a number is prime", "sorts a list of names", "computes the factorial of n",
    "removes duplicates from a list", "converts Celsius to Fahrenheit", "finds the average of a list of numbers",
    "counts the words in a text", "merges two sorted lists", "checks whether a year is a leap year",
    "returns the nth Fibonacci number", "capitalises every word of a sentence", "finds the smallest item of a list",
    "sums the digits of a number", "checks whether two words are anagrams", "flattens a nested list",
    "counts how often each letter appears", "returns the even numbers of a list", "rounds a price to two decimals",
    "reads a file and prints its lines", "validates an email address", "computes the area of a circle",
]
CODE_TEMPLATES = ["Write a {l} function that {t}.", "Show me {l} code that {t}.", "How do I write {l} code that {t}?",
                  "Write a {l} function that {t}, with a comment on each line.", "Explain a {l} function that {t}."]
LOOPS = ["prints the even numbers up to 20", "sums the numbers from 1 to 100", "prints each letter of a word",
         "counts down from 5 to 1", "prints a multiplication table for 7", "prints the squares of 1 to 8"]

REGIONS = ["Europe", "Asia", "Africa", "North America", "the Middle East", "Scandinavia"]
LIST_TEMPLATES = ["Name {n} countries in {r} and their capitals.", "Name {n} rivers in {r}.",
                  "List {n} famous landmarks in {r}.", "Name {n} languages spoken in {r}."]
OCCASIONS = ["a camping trip", "a business trip", "a week of skiing", "a picnic in the park", "a long flight",
             "a first day at school", "a music festival", "a visit to grandparents"]
NUMBERS = ["three", "four", "five", "six", "seven"]
THINGS = ["fruits that are high in vitamin C", "board games for a family evening", "ways to save energy at home",
          "books for a long train ride", "exercises you can do without equipment", "hobbies for a rainy day",
          "herbs to grow on a windowsill", "questions to ask in a job interview", "animals that live in the desert"]

OPS = [("plus", lambda a, b: True), ("minus", lambda a, b: a > b), ("times", lambda a, b: b < 20),
       ("divided by", lambda a, b: b < 20 and a % b == 0)]
VEHICLES = ["car", "cyclist", "bus", "runner", "boat", "plane"]
DURATIONS = ["two hours", "three hours", "half an hour", "four hours"]

FRENCH = ["le chien court dans le jardin", "il pleut depuis ce matin", "nous allons à la plage demain",
          "ma sœur lit un livre", "le train part à huit heures", "j'aime le café noir", "les enfants jouent au foot"]
SPANISH = ["el perro duerme en la cama", "mañana vamos al mercado", "mi hermano toca la guitarra",
           "hace mucho calor hoy", "la tienda abre a las nueve", "me gusta leer por la noche"]
GERMAN = ["der Hund schläft im Garten", "wir fahren morgen nach Berlin", "das Wetter ist heute schön",
          "meine Mutter kocht Suppe", "der Zug hat Verspätung"]
COUNTRIES = {"es": ["Chile", "Perú", "México", "España", "Colombia", "Portugal", "Italia", "Canadá", "Japón", "Egipto"],
             "fr": ["Chili", "Pérou", "Mexique", "Espagne", "Colombie", "Portugal", "Italie", "Canada", "Japon",
                    "Égypte"],
             "de": ["Chile", "Peru", "Mexiko", "Spanien", "Kolumbien", "Portugal", "Italien", "Kanada", "Japan",
                    "Ägypten"]}
LANGUAGE_TEMPLATES = (["Traduis en anglais : {s}."], ["Traduce al inglés: {s}."], ["Übersetze ins Englische: {s}."])
QUESTIONS = [("es", "¿Cuál es la capital de {c}?"), ("fr", "Quelle est la capitale du pays suivant : {c} ?"),
             ("es", "¿Qué idioma se habla en {c}?"), ("de", "Was ist die Hauptstadt von {c}?"),
             ("fr", "Quelle langue parle-t-on dans ce pays : {c} ?")]

ROLES = ["a librarian", "a pirate captain", "a chef", "a museum guide", "a detective", "a hotel receptionist",
         "a football coach", "a wizard", "a taxi driver", "a park ranger"]
ROLE_STARTS = ["greet me as I arrive", "tell me about your day", "give me some advice", "introduce yourself",
               "ask me what I need"]
PLACES = ["Paris", "a space station", "a medieval castle", "a rainforest", "a busy market", "an old lighthouse"]

PLANS = ["a week of healthy meals", "a birthday party for a ten-year-old", "learning to play the guitar in a month",
         "a weekend in Lisbon", "training for a 10 km run", "moving to a new flat", "a school science project"]
STEPS = ["plant a vegetable garden", "bake a loaf of bread", "change a flat bicycle tyre", "start a podcast",
         "paint a room", "prepare for a job interview", "build a bird house", "learn to juggle"]


def code():
    return ([t.format(l=lang, t=task) for t, lang, task in itertools.product(CODE_TEMPLATES, LANGUAGES, CODE_TASKS)]
            + [f"Show a {lang} loop that {loop}." for lang, loop in itertools.product(LANGUAGES, LOOPS)])


def lists():
    return ([t.format(n=n, r=r) for t, n, r in itertools.product(LIST_TEMPLATES, NUMBERS, REGIONS)]
            + [f"Give me a packing list for {o}." for o in OCCASIONS]
            + [f"List {n} {t}." for n, t in itertools.product(NUMBERS, THINGS)])


def arithmetic():
    sums = [f"What is {a} {op} {b}? Show your working." for a, b in itertools.product(range(12, 99, 7), range(3, 90, 9))
            for op, fits in OPS if fits(a, b)]
    speeds = [f"A {v} covers {d} km in {t}. What is its average speed?"
              for v, d, t in itertools.product(VEHICLES, (30, 45, 60, 120, 150), DURATIONS)]
    return sums + speeds + [f"What is {p}% of {n}?" for p, n in itertools.product((10, 15, 20, 25, 50), (80, 240, 360))]


def other_languages():
    translations = [t.format(s=s) for templates, sentences in zip(LANGUAGE_TEMPLATES, (FRENCH, SPANISH, GERMAN))
                    for t in templates for s in sentences]
    into = [f"Translate into {language}: I would like to learn more about {t}."
            for language, t in itertools.product(("French", "Spanish", "German"), TOPICS)]
    return translations + into + [q.format(c=c) for language, q in QUESTIONS for c in COUNTRIES[language]]


def dialogue():
    return ([f"Pretend you are {r} and {s}." for r, s in itertools.product(ROLES, ROLE_STARTS)]
            + [f"Let's role-play: you are {r} in {p}. Start the scene." for r, p in itertools.product(ROLES, PLACES)]
            + [f"Pretend you are {r} and tell me about {t}." for r, t in itertools.product(ROLES, TOPICS)])


def long_answers():
    return ([f"Write a detailed plan for {p}." for p in PLANS] + [f"Describe, step by step, how to {s}." for s in STEPS]
            + [f"Write a detailed guide on how to {s}, with tips for beginners." for s in STEPS]
            + [f"Write a long essay about {t}, with an introduction, three sections and a conclusion." for t in TOPICS])


FAMILIES = {"code": code, "list": lists, "arithmetic": arithmetic, "other language": other_languages,
            "dialogue": dialogue, "long answer": long_answers}


def benchmark_prompts():
    """The benchmark's prompts by kind (bench/kinds_bench.py measures on them: never trained on)."""
    return json.loads(KINDS_FILE.read_text(encoding="utf-8"))


def by_kind(seed=0, never=()):
    """{kind: its instructions, shuffled}, without the benchmark's prompts and ``never``."""
    held = {p for ps in benchmark_prompts().values() for p in ps} | set(never)
    out = {}
    for i, (kind, compose) in enumerate(FAMILIES.items()):
        prompts = [p for p in dict.fromkeys(compose()) if p not in held]
        random.Random(seed + i).shuffle(prompts)
        out[kind] = prompts
    return out


def interleaved(general, seed=0, never=()):
    """As many instructions as ``general`` holds, every kind in turn (general first, then each family, each cycling
    through its own list: the smaller ones repeat, answered afresh each time): any round of consecutive
    instructions holds every kind in equal share."""
    families = [general] + list(by_kind(seed, never).values())
    return [family[i % len(family)] for i in range(len(general) // len(families)) for family in families]
