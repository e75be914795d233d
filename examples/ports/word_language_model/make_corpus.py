"""Write the small synthetic corpus the word-language-model port trains on (no network here).

Sentences come from a fixed little grammar (subject, verb, object, optional place), drawn with a
seeded generator, so the text has structure a language model can learn and is the same on every
run: ``python make_corpus.py data/synthetic`` reproduces the files shipped in the repository.
"""

import os
import random
import sys

ADJECTIVES = ["small", "old", "red", "quiet", "happy", "tired", "clever", "big"]
NOUNS = ["cat", "dog", "bird", "child", "farmer", "teacher", "horse", "fox", "king", "girl"]
VERBS = ["sees", "follows", "likes", "finds", "watches", "helps", "calls", "hears"]
PLACES = ["in the garden", "near the river", "at the market", "under the tree", "on the hill"]
SIZES = {"train.txt": 400, "valid.txt": 60, "test.txt": 60}


def noun_phrase(rng: random.Random) -> str:
    words = [rng.choice(["the", "a"])]
    if rng.random() < 0.5:
        words.append(rng.choice(ADJECTIVES))
    words.append(rng.choice(NOUNS))
    return " ".join(words)


def sentence(rng: random.Random) -> str:
    words = [noun_phrase(rng), rng.choice(VERBS), noun_phrase(rng)]
    if rng.random() < 0.4:
        words.append(rng.choice(PLACES))
    return " ".join(words) + " ."


def write_corpus(path: str, seed: int = 0) -> None:
    """Write ``train.txt``, ``valid.txt`` and ``test.txt`` (one sentence a line) under ``path``."""
    rng = random.Random(seed)
    os.makedirs(path, exist_ok=True)
    for name, lines in SIZES.items():
        with open(os.path.join(path, name), "w", encoding="utf8") as f:
            f.writelines(f" {sentence(rng)} \n" for _ in range(lines))


if __name__ == "__main__":
    write_corpus(sys.argv[1] if len(sys.argv) > 1 else "data/synthetic")
