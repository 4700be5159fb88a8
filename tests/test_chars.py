from __future__ import annotations

import warnings

import torch

from elmo import chars
from elmo.chars import batch_to_ids, word_to_char_ids


def test_word_ids_follow_the_official_scheme():
    assert word_to_char_ids("The")[:6] == (259, 85, 105, 102, 260, 261)
    assert len(word_to_char_ids("The")) == 50
    assert word_to_char_ids("<S>")[:4] == (259, 257, 260, 261)
    assert word_to_char_ids("</S>")[:4] == (259, 258, 260, 261)


def test_any_unicode_is_encoded_as_utf8_bytes():
    ids = word_to_char_ids("北京•")
    data = "北京•".encode()
    assert ids[1 : 1 + len(data)] == tuple(b + 1 for b in data)
    assert ids[1 + len(data)] == 260


def test_long_tokens_are_cut_to_48_bytes_with_one_warning(monkeypatch):
    monkeypatch.setattr(chars, "_warned_truncation", False)
    word_to_char_ids.cache_clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        a = word_to_char_ids("x" * 60)
        word_to_char_ids("y" * 70)
        word_to_char_ids("z" * 80)
    assert len([w for w in caught if "48" in str(w.message)]) == 1
    assert a[:49] == (259, *([ord("x") + 1] * 48)) and a[49] == 260


def test_batch_to_ids_pads_absent_tokens_with_zero_rows():
    ids = batch_to_ids([["a", "b", "c"], ["d"], []])
    assert ids.shape == (3, 3, 50)
    assert (ids[1, 1:] == 0).all() and (ids[2] == 0).all()
    assert (ids[0] > 0).all()
    assert batch_to_ids([]).shape == (0, 0, 50)
    assert ids.dtype == torch.long
