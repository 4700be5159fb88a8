"""Tiny CoNLL-2012 `*_gold_conll` documents for the reader, SRL and coreference tests."""

from __future__ import annotations

import lzma
import random
from pathlib import Path


def row(doc: str, word_no: int, word: str, pos: str, lemma: str, speaker: str, ner: str,
        args: list[str], coref: str, part: int = 0) -> str:
    """One token's line: the 11 fixed columns, the argument columns, coreference."""
    frame = "01" if lemma != "-" else "-"
    return " ".join([doc, str(part), str(word_no), word, pos, "*", lemma, frame, "-", speaker,
                     ner, *args, coref])


def sentence(doc: str, tokens: list[tuple], speaker: str = "A", part: int = 0) -> list[str]:
    """Rows of one sentence: each token (word, pos, lemma, ner, [args...], coref)."""
    return [row(doc, i, w, p, lemma, speaker, ner, list(args), coref, part)
            for i, (w, p, lemma, ner, args, coref) in enumerate(tokens)]


def document(name: str, sentences: list[list[str]], part: int = 0) -> str:
    body = "\n\n".join("\n".join(s) for s in sentences)
    return f"#begin document ({name}); part {part:03d}\n{body}\n\n#end document\n"


DOC = "bc/cctv/00/cctv_0001"
# "John saw Mary ." (saw: ARG0 John, ARG1 Mary) / "He left ." (left: ARG0 He; no entity)
# coreference: John = He (cluster 1), Mary alone (cluster 2)
FIRST = sentence(DOC, [
    ("John", "NNP", "-", "(PERSON)", ["(ARG0*)"], "(1)"),
    ("saw", "VBD", "see", "*", ["(V*)"], "-"),
    ("Mary", "NNP", "-", "(PERSON)", ["(ARG1*)"], "(2)"),
    (".", ".", "-", "*", ["*"], "-"),
], speaker="Speaker#1")
SECOND = sentence(DOC, [
    ("He", "PRP", "-", "*", ["(ARG0*)"], "(1)"),
    ("left", "VBD", "leave", "*", ["(V*)"], "-"),
    (".", ".", "-", "*", ["*"], "-"),
], speaker="Speaker#2")
NW = "nw/wsj/00/wsj_0001"
# "The big dog barked loudly ." (barked: ARG0 the big dog, ARGM-MNR loudly; bark and big
# dog nested mentions 3 and 4) / "Nothing here" (no predicate)
THIRD = sentence(NW, [
    ("The", "DT", "-", "*", ["(ARG0*"], "(3"),
    ("big", "JJ", "-", "*", ["*"], "(4"),
    ("dog", "NN", "-", "*", ["*)"], "3)|4)"),
    ("barked", "VBD", "bark", "*", ["(V*)"], "-"),
    ("loudly", "RB", "-", "*", ["(ARGM-MNR*)"], "-"),
    (".", ".", "-", "*", ["*"], "-"),
], part=0)
FOURTH = sentence(NW, [("Nothing", "NN", "-", "*", [], "-"), ("here", "RB", "-", "*", [], "-")])

TEXT = document(DOC, [FIRST, SECOND]) + document(NW, [THIRD, FOURTH])


def write_conll2012(path: Path, text: str = TEXT) -> Path:
    """`text` written to `path`, xz-compressed when the name ends in .xz."""
    data = text.encode("utf-8")
    path.write_bytes(lzma.compress(data) if path.name.endswith(".xz") else data)
    return path


PEOPLE, THINGS, PLACES = ["anna", "bob", "carl"], ["ball", "book", "cake"], ["paris", "rome"]


def srl_text(documents: int, seed: int) -> str:
    """Generated documents of a learnable SRL pattern: 'PERSON VERB THING [in PLACE] .', the
    person ARG0, the thing ARG1, the place ARGM-LOC; 'PERSON said PERSON VERB THING .' adds a
    second predicate (said: ARG0, ARG1 the clause); every fifth sentence has no predicate."""
    rng = random.Random(seed)
    text = ""
    for d in range(documents):
        name = f"nw/gen/00/gen_{seed}{d:03d}"
        sentences = []
        for s in range(4):
            person, verb, thing = rng.choice(PEOPLE), rng.choice(["saw", "took"]), \
                rng.choice(THINGS)
            if s == 3 and d % 2:  # no predicate
                sentences.append(sentence(name, [(w, "NN", "-", "*", [], "-")
                                                 for w in (thing, "here", ".")]))
            elif s == 2:  # two predicates: said and the verb
                other = rng.choice(PEOPLE)
                sentences.append(sentence(name, [
                    (person, "NNP", "-", "*", ["(ARG0*)", "*"], "-"),
                    ("said", "VBD", "say", "*", ["(V*)", "*"], "-"),
                    (other, "NNP", "-", "*", ["(ARG1*", "(ARG0*)"], "-"),
                    (verb, "VBD", verb, "*", ["*", "(V*)"], "-"),
                    (thing, "NN", "-", "*", ["*)", "(ARG1*)"], "-"),
                    (".", ".", "-", "*", ["*", "*"], "-")]))
            else:
                tokens = [(person, "NNP", "-", "*", ["(ARG0*)"], "-"),
                          (verb, "VBD", verb, "*", ["(V*)"], "-"),
                          (thing, "NN", "-", "*", ["(ARG1*)"], "-")]
                if rng.random() < 0.5:
                    tokens += [("in", "IN", "-", "*", ["(ARGM-LOC*"], "-"),
                               (rng.choice(PLACES), "NNP", "-", "*", ["*)"], "-")]
                sentences.append(sentence(name, tokens + [(".", ".", "-", "*", ["*"], "-")]))
        text += document(name, sentences)
    return text
