"""Model files from anyone, second review: what a file stores, not only what it declares.

HDF5 datasets of the right shape whose chunks inflate to a gigabyte (deflate once or twice, a
chunk larger than the dataset, an NLPL archive), filters no weights file uses; tensors in
torch files whose storage is a few bytes for a huge or right shape (a stride of 0, an
overlapping view); a model's own files as links out of its folder; clips beyond float32. Each
file is built here, small; each ends in one line naming it, or in a correct load. The bombs
load in a subprocess, whose peak memory is measured."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from h5py import h5d, h5p, h5s, h5t, h5z

from elmo import Embedder, load_model, save_bilm_tf, save_pretrained
from elmo.cli import main
from elmo.errors import ModelFileError
from elmo.loading.formats.efml import load_efml
from tests.conftest import random_bilm
from tests.helpers.model_files import NETWORK, write_allennlp_archive, write_efml_dir

BOMB_BYTES = 2**30  # what a bomb would inflate to: 1 GiB
PEAK_LIMIT = 600 * 2**20
TENSOR = "CNN_proj/b_proj"  # the dataset the HDF5 cases replace: (16,) floats
SECRET = "secret-token-4711"  # the contents of a file outside the model


def zeros_deflated(size: int) -> bytes:
    """A zlib stream of `size` zero bytes (a multiple of 1 MiB): one deflated MiB, repeated
    (it refers to nothing before it), then an empty last block and the checksum; ~1 KB/MiB."""
    block = 2**20
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)  # raw: no header of its own
    segment = deflate.compress(bytes(block)) + deflate.flush(zlib.Z_FULL_FLUSH)
    adler = ((size % 65521) << 16) | 1  # adler32 of zeros
    return b"\x78\xda" + segment * (size // block) + b"\x03\x00" + adler.to_bytes(4, "big")


def plant_chunk(weights: Path, name: str, stored: bytes, filters: list[int],
                chunks: tuple[int, ...] | None = None, maxshape: tuple | None = None) -> None:
    """Replace float32 dataset `name` with one of the same shape stored as one chunk (of shape
    `chunks`, default the dataset's) of the bytes `stored`, declared to pass `filters`."""
    with h5py.File(weights, "a") as f:
        shape = f[name].shape
        del f[name]
        plist = h5p.create(h5p.DATASET_CREATE)
        plist.set_chunk(chunks or shape)
        for code in filters:
            plist.set_filter(code, 0, (6,) if code == h5z.FILTER_DEFLATE else ())
        space = h5s.create_simple(shape, tuple(h5s.UNLIMITED if m is None else m
                                               for m in maxshape or shape))
        dataset = h5d.create(f.id, name.encode(), h5t.IEEE_F32LE, space, dcpl=plist)
        dataset.write_direct_chunk((0,) * len(shape), stored)


def bilm_tf_dir(path: Path) -> tuple[Path, Path]:
    return save_bilm_tf(random_bilm(seed=4), path)


def nlpl_zip(path: Path, options: Path, weights: Path) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("options.json", options.read_bytes())
        archive.writestr("model.hdf5", weights.read_bytes())
        archive.writestr("vocab.txt", "the\n")
    return path


LOAD = r"""
import re, sys
from pathlib import Path
from elmo import load_model
from elmo.errors import ElmoError
try:
    load_model(sys.argv[1])
    print("loaded")
except ElmoError as err:
    print(f"refused: {err}")
# VmHWM, not ru_maxrss: after fork and exec, ru_maxrss also counts the parent's resident memory
# at the fork (pytest's, gigabytes in a full run)
print(int(re.search(r"VmHWM:\s+(\d+) kB", Path("/proc/self/status").read_text())[1]) * 1024)
"""


def load_in_subprocess(model: Path) -> tuple[str, int]:
    """Load `model` in a fresh Python: what it said (one line) and its peak resident bytes."""
    done = subprocess.run([sys.executable, "-c", LOAD, str(model)], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    *said, peak = done.stdout.strip().splitlines()
    assert len(said) == 1, said
    return said[0], int(peak)


def one_line_error(capsys, argv: list[str]) -> str:
    """Run the CLI, which must fail with one line and no traceback; that line."""
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("elmo: error: ") and err.count("\n") == 1, err
    return err


# ---- HDF5: what a dataset's chunks inflate to ----------------------------------------------


def bomb_once(weights: Path) -> None:
    plant_chunk(weights, TENSOR, zeros_deflated(BOMB_BYTES), [h5z.FILTER_DEFLATE])


def bomb_twice(weights: Path) -> None:
    """Deflate applied twice: the 1 GiB bomb's MB, deflated again, takes a few KB."""
    stored = zlib.compress(zeros_deflated(BOMB_BYTES), 9)
    assert len(stored) < 2**14
    plant_chunk(weights, TENSOR, stored, [h5z.FILTER_DEFLATE, h5z.FILTER_DEFLATE])


def bomb_in_a_huge_chunk(weights: Path) -> None:
    """The right shape in one chunk of 2**28 floats (resizable: HDF5 allows the chunk)."""
    plant_chunk(weights, TENSOR, zeros_deflated(BOMB_BYTES), [h5z.FILTER_DEFLATE],
                chunks=(BOMB_BYTES // 4,), maxshape=(None,))


@pytest.mark.parametrize(("plant", "zipped", "said"), [
    (bomb_once, False, "stores a chunk of 1,061,896 bytes, more than the 64 its values take"),
    (bomb_once, True, "stores a chunk of 1,061,896 bytes, more than the 64 its values take"),
    (bomb_twice, False, "inflates to more than the 4,160 bytes its chunk holds"),
    (bomb_in_a_huge_chunk, False, "chunks of shape (268435456,), larger than the tensor's "
                                  "(16,)"),
], ids=["deflate", "deflate-in-nlpl-zip", "deflate-twice", "chunk-larger-than-dataset"])
def test_an_hdf5_bomb_is_refused_in_bounded_memory(tmp_path, plant, zipped, said):
    options, weights = bilm_tf_dir(tmp_path / "m")
    plant(weights)
    assert weights.stat().st_size < 4 * 2**20
    model = nlpl_zip(tmp_path / "m.zip", options, weights) if zipped else options.parent
    message, peak = load_in_subprocess(model)
    assert peak < PEAK_LIMIT, f"peak {peak / 2**20:.0f} MiB ({message})"
    assert message.startswith("refused: ") and "'CNN_proj/b_proj'" in message, message
    assert said in message, message


@pytest.mark.parametrize(("create", "said"), [
    ({"compression": "lzf"}, "HDF5 filter 'lzf' (code 32000), which is not read"),
    ({"fletcher32": True}, "HDF5 filter 'fletcher32' (code 3), which is not read"),
    ({"scaleoffset": 0}, "HDF5 filter 'scaleoffset' (code 6), which is not read"),
    ({"chunks": (64,), "maxshape": (None,)}, "chunks of shape (64,), larger than the tensor's"),
])
def test_storage_no_weights_file_uses_is_refused_unread(tmp_path, capsys, create, said):
    options, weights = bilm_tf_dir(tmp_path / "m")
    with h5py.File(weights, "a") as f:
        values = f[TENSOR][()]
        del f[TENSOR]
        f.create_dataset(TENSOR, data=values, **create)
    err = one_line_error(capsys, ["export", str(options.parent), str(tmp_path / "out")])
    assert said in err and "weights.hdf5: tensor 'CNN_proj/b_proj'" in err, err


def test_a_chunk_that_inflates_to_less_than_it_holds_is_refused(tmp_path):
    options, weights = bilm_tf_dir(tmp_path / "m")
    plant_chunk(weights, TENSOR, zlib.compress(bytes(40)), [h5z.FILTER_DEFLATE])
    with pytest.raises(ModelFileError, match="holds 40 bytes where its shape .* takes 64"):
        load_model(options.parent)


def test_chunked_deflated_shuffled_weights_load_as_they_were_written(tmp_path):
    """What h5py writes with gzip and shuffle, in chunks smaller than each tensor (with
    partial chunks at the edges, and chunks never written: the fill value), reads back."""
    options, weights = bilm_tf_dir(tmp_path / "m")
    plain = load_model(options.parent).bilm.state_dict()
    with h5py.File(weights, "a") as f:
        names = []
        f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        for name in names:
            values = f[name][()]
            del f[name]
            chunks = tuple(max(1, (s + 2) // 3) for s in values.shape)
            f.create_dataset(name, data=values.astype(">f8"), chunks=chunks,
                             compression="gzip", shuffle=True)
    assert load_model(options.parent).bilm.state_dict().keys() == plain.keys()
    for name, tensor in load_model(options.parent).bilm.state_dict().items():
        torch.testing.assert_close(tensor, plain[name], atol=0, rtol=0)
    with h5py.File(weights, "a") as f:  # a chunk never written reads as the fill value
        shape = f[TENSOR].shape
        del f[TENSOR]
        f.create_dataset(TENSOR, shape=shape, dtype="f4", chunks=(4,), fillvalue=0.25,
                         compression="gzip")[:4] = 1.0
    bias = load_model(options.parent).bilm.token_encoder.projection.bias
    assert bias[:4].tolist() == [1.0] * 4 and bias[4:].tolist() == [0.25] * (shape[0] - 4)


# ---- torch files: what a tensor's storage holds ----------------------------------------------


def replace_tensor(path: Path, key: str, make, legacy: bool) -> None:
    """Rewrite the torch file `path` with its tensor `key` (or the one ending in it) made by
    `make(tensor)`."""
    state = torch.load(path, weights_only=True)
    key = next(k for k in state if k.endswith(key))
    state[key] = make(state[key])
    torch.save(state, path, _use_new_zipfile_serialization=not legacy)


def stride_0(tensor: torch.Tensor) -> torch.Tensor:
    return torch.zeros(1).expand(tensor.shape)


def overlapping(tensor: torch.Tensor) -> torch.Tensor:
    """Every row the same storage shifted by one value: (rows + cols - 1) values stored."""
    rows, cols = tensor.shape
    return torch.arange(rows + cols - 1, dtype=tensor.dtype).as_strided((rows, cols), (1, 1))


def huge(tensor: torch.Tensor) -> torch.Tensor:
    """1 GiB once converted to float32 (float64 here: .float() copies), from 8 bytes."""
    return torch.zeros(1, dtype=torch.float64).expand(16384, 16384)


EFML_TENSOR = ("encoder.pkl", "forward_layer_0.input_linearity.weight")
ARCHIVE_TENSOR = ("weights.th", "_elmo_lstm.forward_layer_0.input_linearity.weight")


def efml_model(tmp_path: Path) -> Path:
    return write_efml_dir(tmp_path / "efml")


def archive_model(tmp_path: Path) -> Path:
    return write_allennlp_archive(tmp_path / "allennlp")


@pytest.mark.parametrize(("write", "where", "legacy"), [
    (efml_model, EFML_TENSOR, True), (efml_model, EFML_TENSOR, False),
    (archive_model, ARCHIVE_TENSOR, False)], ids=["efml-legacy", "efml-zip", "weights.th"])
@pytest.mark.parametrize(("make", "said"), [
    (stride_0, r"stores 4 bytes for .* \(a stride of 0 or an overlapping view, strides \(0, 0\)"),
    (overlapping, r"stores [\d,]+ bytes for .* strides \(1, 1\)"),
], ids=["stride-0", "overlapping"])
def test_a_tensor_whose_storage_is_smaller_than_its_shape_is_refused(tmp_path, write, where,
                                                                    legacy, make, said):
    model = write(tmp_path)
    replace_tensor(model / where[0], where[1], make, legacy)
    with pytest.raises(ModelFileError, match=said) as raised:
        load_model(model)
    assert where[0] in str(raised.value) and where[1] in str(raised.value)


@pytest.mark.parametrize(("write", "where", "legacy"), [
    (efml_model, EFML_TENSOR, True), (archive_model, ARCHIVE_TENSOR, False)],
    ids=["efml", "weights.th"])
def test_a_huge_declared_tensor_is_refused_before_any_conversion(tmp_path, write, where,
                                                                 legacy):
    model = write(tmp_path)
    replace_tensor(model / where[0], where[1], huge, legacy)
    assert (model / where[0]).stat().st_size < 2**20
    message, peak = load_in_subprocess(model)
    assert peak < PEAK_LIMIT, f"peak {peak / 2**20:.0f} MiB ({message})"
    assert message.startswith("refused: ") and "has shape (16384, 16384), but" in message


def test_an_integer_tensor_or_a_number_where_a_weight_belongs_is_refused(tmp_path):
    model = efml_model(tmp_path)
    replace_tensor(model / EFML_TENSOR[0], EFML_TENSOR[1], lambda t: t.long(), legacy=True)
    with pytest.raises(ModelFileError, match="holds torch.int64, not floating-point"):
        load_efml(model)
    archive = archive_model(tmp_path)
    replace_tensor(archive / ARCHIVE_TENSOR[0], ARCHIVE_TENSOR[1], lambda t: 3, legacy=False)
    with pytest.raises(ModelFileError, match="weight' holds a value of type int, not a tensor"):
        load_model(archive)


def test_transposed_and_float64_tensors_still_load(tmp_path):
    """A view that stores each value once (a transpose), in float64, is a weight like any."""
    model = efml_model(tmp_path)
    expected = load_efml(model).state_dict()
    replace_tensor(model / EFML_TENSOR[0], EFML_TENSOR[1],
                   lambda t: t.double().T.contiguous().T, legacy=True)
    for name, tensor in load_efml(model).state_dict().items():
        torch.testing.assert_close(tensor, expected[name], atol=0, rtol=0)


# ---- a model's own files: regular files inside its folder ------------------------------------


@pytest.fixture
def secret(tmp_path) -> Path:
    path = tmp_path / "outside" / "private.txt"
    path.parent.mkdir()
    path.write_text(f"{SECRET}\t0\n{SECRET}\n", encoding="utf-8")
    return path


def test_export_copies_no_vocabulary_linked_out_of_the_model(tmp_path, capsys, secret):
    model = save_pretrained(random_bilm(), tmp_path / "native")
    (model / "vocab.txt").symlink_to(secret)
    out = tmp_path / "out"
    err = one_line_error(capsys, ["export", str(model), str(out), "--format", "native"])
    assert f"vocab.txt is a link to {secret}, outside the model's directory" in err
    assert SECRET not in err
    written = [p.read_bytes() for p in out.rglob("*") if p.is_file()] if out.exists() else []
    assert not any(SECRET.encode() in data for data in written)


def test_a_vocabulary_linked_inside_the_model_is_exported_as_it_is(tmp_path):
    model = save_pretrained(random_bilm(), tmp_path / "native")
    (model / "words").mkdir()
    (model / "words" / "list.txt").write_bytes("the\r\nbank\n\u00e9\n".encode())
    (model / "vocab.txt").symlink_to(Path("words") / "list.txt")
    assert main(["export", str(model), str(tmp_path / "out"), "--format", "native"]) == 0
    assert (tmp_path / "out" / "vocab.txt").read_bytes() == "the\r\nbank\n\u00e9\n".encode()


def test_a_vocabulary_that_is_no_text_is_not_exported(tmp_path, capsys):
    model = save_pretrained(random_bilm(), tmp_path / "native")
    (model / "vocab.txt").write_bytes(b"the\n\xff\xfe" + SECRET.encode())
    err = one_line_error(capsys, ["export", str(model), str(tmp_path / "out"), "--format",
                                  "native"])
    assert "vocab.txt is not UTF-8 text (byte 4)" in err and SECRET not in err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_weights_linked_out_of_the_model_are_refused(tmp_path, secret):
    options, weights = bilm_tf_dir(tmp_path / "elsewhere")
    model = tmp_path / "m"
    model.mkdir()
    (model / "options.json").write_bytes(options.read_bytes())
    (model / "weights.hdf5").symlink_to(weights)
    with pytest.raises(ModelFileError, match=r"weights.hdf5 is a link to .*elsewhere/weights"
                                             r".hdf5, outside the model's directory"):
        load_model(model)
    (model / "weights.hdf5").unlink()
    (model / "weights.hdf5").symlink_to(secret)  # any local file, read as weights
    with pytest.raises(ModelFileError, match="outside the model's directory"):
        load_model(model)


@pytest.mark.parametrize("name", ["char.dic", "encoder.pkl", "config.json"])
def test_efml_files_linked_out_of_the_model_are_refused_unread(tmp_path, secret, name):
    model = efml_model(tmp_path)
    (model / name).unlink()
    (model / name).symlink_to(secret)
    with pytest.raises(ModelFileError) as raised:
        load_efml(model)
    assert f"{name} is a link to {secret}" in str(raised.value)
    assert SECRET not in str(raised.value)


def test_a_damaged_char_dic_is_named_without_its_contents(tmp_path):
    model = efml_model(tmp_path)
    lines = (model / "char.dic").read_text(encoding="utf-8").splitlines()
    lines[3] = f"{SECRET} 3 x"
    (model / "char.dic").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ModelFileError, match=r"char.dic, line 4: expected 'token<TAB>id'") \
            as raised:
        load_efml(model)
    assert SECRET not in str(raised.value)


def test_a_model_file_that_is_no_regular_file_is_refused(tmp_path):
    """A directory (as a FIFO or a device would be) where a model's file belongs."""
    model = efml_model(tmp_path)
    (model / "word.dic").unlink()
    (model / "word.dic").mkdir()
    with pytest.raises(ModelFileError, match="word.dic is not a regular file"):
        load_efml(model)


# ---- config numbers ---------------------------------------------------------------------------


@pytest.mark.parametrize("value", [1e300, 1e39, 10001.0])
def test_clips_beyond_the_bound_get_one_line(tmp_path, capsys, value):
    options, _ = bilm_tf_dir(tmp_path / "m")
    data = json.loads(options.read_text())
    data["lstm"]["cell_clip"] = value
    options.write_text(json.dumps(data))
    err = one_line_error(capsys, ["export", str(options.parent), str(tmp_path / "out")])
    assert "options.json: lstm.cell_clip must be" in err
    efml = efml_model(tmp_path)
    network = json.loads(json.dumps(NETWORK))
    network["encoder"]["proj_clip"] = value
    (efml / "net.json").write_text(json.dumps(network))
    with pytest.raises(ModelFileError, match="encoder.proj_clip must be"):
        load_efml(efml)
    native = save_pretrained(random_bilm(), tmp_path / "native")
    config = json.loads((native / "config.json").read_text())
    config["proj_clip"] = value
    (native / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelFileError, match="proj_clip must be"):
        load_model(native)


def test_a_clip_at_the_bound_loads_and_embeds(tmp_path):
    options, _ = bilm_tf_dir(tmp_path / "m")
    data = json.loads(options.read_text())
    data["lstm"]["cell_clip"] = data["lstm"]["proj_clip"] = 1e4
    options.write_text(json.dumps(data))
    embedder = Embedder.from_pretrained(options.parent)
    assert embedder.model.config.cell_clip == 1e4
    assert np.isfinite(embedder.embed_sentence(["The", "bank", "."])).all()


@pytest.mark.parametrize(("key", "value"), [(("char_cnn", "activation"), "x" * 100_000),
                                            (("lstm", "dim"), "7" * 100_000),
                                            (("char_cnn", "filters"), {"k": "x" * 100_000})])
def test_a_config_value_is_quoted_shortened(tmp_path, capsys, key, value):
    options, _ = bilm_tf_dir(tmp_path / "m")
    data = json.loads(options.read_text())
    data[key[0]][key[1]] = value
    options.write_text(json.dumps(data))
    err = one_line_error(capsys, ["export", str(options.parent), str(tmp_path / "out")])
    assert f"{'.'.join(key)} must" in err and len(err) < len(str(options)) + 200, err
