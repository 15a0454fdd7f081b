"""The one checkpoint format: header, settings refusal naming each difference, fingerprint.

No torch here: the reader and the fingerprint belong to the core's experiments side.
"""

import json
from types import SimpleNamespace

import numpy as np
import pytest

from minimal_attn.datasets.seq import TextTask
from minimal_attn.errors import InputError
from minimal_attn.experiments.checkpoints import (
    checkpoint_header,
    data_fingerprint,
    differences,
    read_checkpoint,
    read_json,
    write_checkpoint,
)


def _save(path, state):
    write_checkpoint(str(path), lambda f: f.write(json.dumps(state).encode()))


def _read(path, settings, data="d1", **kw):
    return read_checkpoint(str(path), read_json, 3, "toy", settings, data, **kw)


def test_header_round_trip_and_prev_fallback(tmp_path):
    path = tmp_path / "c" / "run.ckpt"
    settings = {"lr": 0.1, "hidden": 4}
    _save(path, {**checkpoint_header(3, "toy", settings, "d1"), "step": 1})
    _save(path, {**checkpoint_header(3, "toy", settings, "d1"), "step": 2})
    assert _read(path, settings)["step"] == 2
    path.write_bytes(b"{\"format\": 3, ")                     # a cut-off write
    lines = []
    assert _read(path, settings, log=lines.append)["step"] == 1
    assert len(lines) == 1 and "run.ckpt.prev" in lines[0] and "not valid JSON" in lines[0]
    assert _read(tmp_path / "none.ckpt", settings) is None


def test_settings_refusal_names_each_difference_and_the_fix(tmp_path):
    path = tmp_path / "run.ckpt"
    _save(path, checkpoint_header(3, "toy", {"lr": 0.1, "hidden": 4, "seed": 0}, "d1"))
    with pytest.raises(InputError) as err:
        _read(path, {"lr": 0.2, "hidden": 4, "seed": 0, "clip": 1.0}, data="d2",
              instead="drop --resume", param="out")
    msg = str(err.value)
    assert "\n" not in msg and str(path) in msg and err.value.param == "out"
    assert "lr=0.1 (now 0.2)" in msg and "clip=None (now 1.0)" in msg and "data" in msg
    assert "hidden" not in msg and "seed" not in msg
    assert msg.endswith("use the same options or drop --resume")
    # a refusal of settings never falls back to .prev (the file is fine, the options differ)
    _save(path, checkpoint_header(3, "toy", {"lr": 0.1}, "d1"))
    with pytest.raises(InputError, match="lr=0.1 \\(now 0.3\\)"):
        _read(path, {"lr": 0.3})
    assert _read(path, None, data=None)["config"] == {"lr": 0.1}     # settings unchecked


def test_defaults_stand_for_settings_left_out():
    assert differences({"lr": 1}, {"lr": 1, "warmup": 0}, {"warmup": 0}) == []
    assert differences({"lr": 1}, {"lr": 1, "warmup": 2}, {"warmup": 0}) == \
        ["warmup=0 (now 2)"]
    long = differences({"runs": list(range(50))}, {"runs": list(range(51))})
    assert long == ["runs"]                                # too long to print: named only


@pytest.mark.parametrize("found,reason", [
    ({"format": 3, "kind": "other"}, "other checkpoint"),
    ({"format": 2, "kind": "toy"}, "another version"),
    ([1, 2], "not an attn-dyn checkpoint")])
def test_wrong_format_or_kind_is_unreadable(tmp_path, found, reason):
    path = tmp_path / "run.ckpt"
    _save(path, found)
    with pytest.raises(InputError, match=reason) as err:
        _read(path, {}, instead="another --out")
    assert "delete it" in str(err.value) and "another --out" in str(err.value)


def _mosaics():
    X = np.arange(2 * 40 * 3 * 4, dtype=np.float64).reshape(2, 40, 3, 4) / 7
    return [SimpleNamespace(X=X[k], y=np.arange(40) % 2, z=np.arange(40) % 3) for k in (0, 1)]


def _task():
    src = [np.arange(3, 3 + n % 5 + 1) for n in range(12)]
    tgt = [np.array([n % 2]) for n in range(12)]
    return TextTask("classify", src[:8], tgt[:8], src[8:], tgt[8:], n_vocab=9, n_out=2,
                    itos=[])


def test_fingerprint_keeps_the_digests_of_existing_checkpoints():
    # digests the two earlier functions (linear_train's and snell/train's) gave these
    # data; a checkpoint written before they became one must still resume
    assert data_fingerprint(*_mosaics()) == "eb86ff2038a06e28dd757536cfbd1f9c1441b9d5"
    assert data_fingerprint(_task()) == "19b603e1a61c4a118e24fc932ae7822d84b0d46e"


def test_fingerprint_sees_one_changed_label_position_input_or_token():
    base = data_fingerprint(*_mosaics())
    for key in ("y", "z", "X"):
        sets = _mosaics()
        getattr(sets[1], key)[16] += 1                     # instance 16: in the X sample
        assert data_fingerprint(*sets) != base, key
    assert data_fingerprint(*reversed(_mosaics())) != base  # order of the sets counts
    task = _task()
    task.val_src[1][0] += 1
    assert data_fingerprint(task) != data_fingerprint(_task())
    a = np.arange(6.0)
    assert data_fingerprint(a, "x", 3) == data_fingerprint(a.copy(), "x", 3)
    assert data_fingerprint(a, "x", 3) != data_fingerprint(a, "x", 4)
