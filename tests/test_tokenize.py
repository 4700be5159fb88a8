import pickle
import sys

import pytest

from elmo.tokenize import TOKENIZER_NAMES, TOKENIZERS, get_tokenizer


def test_whitespace_splits_on_runs_of_whitespace():
    tok = get_tokenizer("whitespace")
    assert tok("  The cat\tsat.\n") == ["The", "cat", "sat."]
    assert tok("   ") == []


def test_chars_gives_every_non_space_character():
    tok = get_tokenizer("chars")
    assert tok("我爱 北京\u3000！") == ["我", "爱", "北", "京", "！"]


def test_moses_splits_punctuation_without_escaping():
    tok = get_tokenizer("moses")
    want = "Hello , world ! Tom & Jerry 's ."
    assert tok("Hello, world! Tom & Jerry's.") == want.split()


def test_wikitext_splits_raw_text_as_wikitext_wrote_it():
    # The raw article text and WikiText-2's own line for it (test.txt, "Robert Boulter").
    tok = get_tokenizer("wikitext")
    raw = ("Robert Boulter is an English film, television and theatre actor. He had a "
           "guest-starring role on the television series The Bill in 2000.")
    want = ("Robert Boulter is an English film , television and theatre actor . He had a "
            "guest @-@ starring role on the television series The Bill in 2000 .")
    assert tok(raw) == want.split()
    assert tok("It cost $1,500,000, 3.5 times more.") == \
        "It cost $ 1 @,@ 500 @,@ 000 , 3 @.@ 5 times more .".split()
    assert not TOKENIZERS["wikitext"].keeps_text


def test_jieba_segments_and_drops_whitespace():
    tok = get_tokenizer("jieba")
    tokens = tok("我爱北京天安门 。 hello  world")
    assert "北京" in tokens and "天安门" in tokens
    assert all(t.strip() for t in tokens)
    assert "".join(tokens) == "我爱北京天安门。helloworld"


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_tokenizers_pickle(name):
    tok = pickle.loads(pickle.dumps(get_tokenizer(name)))
    assert tok("a b") == ["a", "b"]


def test_unknown_name_lists_choices():
    with pytest.raises(ValueError, match="whitespace, moses, wikitext, jieba, chars"):
        get_tokenizer("spacy")


@pytest.mark.parametrize(
    ("name", "module", "extra"), [("moses", "sacremoses", "moses"), ("jieba", "jieba", "zh")]
)
def test_missing_backend_says_what_to_install(monkeypatch, name, module, extra):
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` fail
    with pytest.raises(ImportError, match=rf"pip install 'elmo-bilm\[{extra}\]'"):
        get_tokenizer(name)
