import pytest

from elmo.vocab import BOS, EOS, SPECIAL_TOKENS, UNK, Vocabulary

SENTENCES = [["b", "a", "c"], ["a", "b", "d"], ["a", "<S>", "e"], ["c", "b"]]


def test_build_sorts_by_frequency_then_word():
    vocab = Vocabulary.build(SENTENCES)
    # a:3, b:3 (tie -> by word), c:2, d:1, e:1; a literal <S> in the text is not counted
    assert vocab.words == [BOS, EOS, UNK, "a", "b", "c", "d", "e"]
    assert SPECIAL_TOKENS == ("<S>", "</S>", "<UNK>")
    assert (vocab.bos, vocab.eos, vocab.unk) == (0, 1, 2)
    assert len(vocab) == 8


def test_build_min_count_and_max_size():
    assert Vocabulary.build(SENTENCES, min_count=2).words[3:] == ["a", "b", "c"]
    assert Vocabulary.build(SENTENCES, max_size=5).words == [BOS, EOS, UNK, "a", "b"]
    with pytest.raises(ValueError, match="max_size"):
        Vocabulary.build(SENTENCES, max_size=2)


def test_lookups():
    vocab = Vocabulary.build(SENTENCES)
    assert vocab.word_to_id("c") == 5
    assert vocab.word_to_id("never-seen") == vocab.unk
    assert vocab.encode(["a", "zzz", "</S>"]) == [3, 2, 1]
    assert vocab.id_to_word(4) == "b"
    assert vocab.decode([0, 3]) == [BOS, "a"]
    assert "a" in vocab and "zzz" not in vocab
    with pytest.raises(IndexError):
        vocab.id_to_word(8)


def test_save_and_load_roundtrip(tmp_path):
    vocab = Vocabulary.build(SENTENCES)
    path = tmp_path / "vocab.txt"
    vocab.save(path)
    assert path.read_text(encoding="utf-8") == "<S>\n</S>\n<UNK>\na\nb\nc\nd\ne\n"
    assert Vocabulary.from_file(path) == vocab
    assert [p.name for p in tmp_path.iterdir()] == ["vocab.txt"]  # no temporary file left


def test_save_replaces_existing_file(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("old\n", encoding="utf-8")
    Vocabulary.build([["new"]]).save(path)
    assert path.read_text(encoding="utf-8").splitlines()[-1] == "new"


def test_from_file_accepts_special_tokens_anywhere(tmp_path):
    path = tmp_path / "v.txt"
    path.write_text("the\n<UNK>\n,\n</S>\n<S>\r\nof\n", encoding="utf-8")
    vocab = Vocabulary.from_file(path)
    assert (vocab.bos, vocab.eos, vocab.unk) == (4, 3, 1)
    assert vocab.word_to_id("of") == 5  # line index is the id


def test_from_file_requires_all_special_tokens(tmp_path):
    path = tmp_path / "bad_vocab.txt"
    path.write_text("<S>\nthe\n<UNK>\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad_vocab\.txt.*</S>"):
        Vocabulary.from_file(path)


def test_from_file_rejects_empty_lines_and_duplicates(tmp_path):
    path = tmp_path / "v.txt"
    path.write_text("<S>\n</S>\n\n<UNK>\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"v\.txt:3: empty line"):
        Vocabulary.from_file(path)
    path.write_text("<S>\n</S>\n<UNK>\nthe\nthe\n", encoding="utf-8")
    with pytest.raises(ValueError, match="duplicate word 'the'"):
        Vocabulary.from_file(path)
