"""The stacked optimizers over one flat buffer (backends/vr/batched_flat.py): seed slices
equal torch.optim.SGD / Adam run per seed, checkpoints round-trip exactly, and a step is
a fixed handful of operators whatever the number of parameters.

References are independent of the code under test: ``torch.optim`` on each seed's slices.
"""

import pytest

from minimal_attn.errors import InputError

torch = pytest.importorskip("torch")

from minimal_attn.backends.vr.batched_flat import ALIGN  # noqa: E402
from minimal_attn.backends.vr.stacked_optimizers import (  # noqa: E402
    StackedAdam,
    StackedSGD,
)

pytestmark = pytest.mark.usefixtures("torch_one_thread")
SHAPES = [(4, 3), (5,), (2, 3, 3, 3), (7,)]
LRS = [1e-2, 5e-3, 3e-2]


def make(dtypes, gen):
    """Stacked (3, ...) parameters, one per shape, in the given dtypes (cycled)."""
    return [torch.randn((3,) + s, generator=gen, dtype=dtypes[i % len(dtypes)])
            for i, s in enumerate(SHAPES)]


def run_both(kind, dtypes, steps=4):
    """Our optimizer and torch's per seed on the same gradients; returns both sides."""
    gen = torch.Generator().manual_seed(1)
    params = make(dtypes, gen)
    stacked = [p.clone().requires_grad_() for p in params]
    refs = [[p[k].clone().requires_grad_() for p in params] for k in range(3)]
    if kind == "sgd":
        ours = StackedSGD(stacked, momentum=0.9)
        opts = [torch.optim.SGD(r, lr=lr, momentum=0.9) for r, lr in zip(refs, LRS)]
    else:
        ours = StackedAdam(stacked)
        opts = [torch.optim.Adam(r, lr=lr) for r, lr in zip(refs, LRS)]
    for step in range(steps):
        grads = [torch.randn(p.shape, generator=gen, dtype=p.dtype) * 10.0 ** -step
                 for p in params]
        for p, g in zip(stacked, grads):
            p.grad = g.clone()
        ours.step(LRS)
        for k in range(3):
            for r, g in zip(refs[k], grads):
                r.grad = g[k].clone()
            opts[k].step()
    return stacked, ours, refs, opts


@pytest.mark.parametrize("kind", ["sgd", "adam"])
@pytest.mark.parametrize("dtypes", [[torch.float32], [torch.float64],
                                    [torch.float32, torch.float64]],
                         ids=["f32", "f64", "mixed"])
def test_flat_step_equals_torch_per_seed_bit_for_bit(kind, dtypes):
    stacked, ours, refs, opts = run_both(kind, dtypes)
    for k in range(3):
        for p, r in zip(stacked, refs[k]):
            assert torch.equal(p[k].detach(), r.detach())
        mine, theirs = ours.seed_state_dict(k, LRS[k]), opts[k].state_dict()
        assert mine["param_groups"] == theirs["param_groups"]
        assert mine["state"].keys() == theirs["state"].keys()
        for i, entry in theirs["state"].items():
            for key, value in entry.items():
                assert torch.equal(torch.as_tensor(mine["state"][i][key]).float(),
                                   torch.as_tensor(value).float()), (i, key)
    # one buffer per dtype, every parameter a view into it, aligned
    assert len(ours.layout.groups) == len(dtypes)
    for group in ours.layout.groups:
        base = group.flat.data_ptr()
        for p in group.params:
            offset = (p.data_ptr() - base) // p.element_size()
            assert 0 <= offset < group.flat.numel() and offset % ALIGN == 0
    with torch.no_grad():
        ours.layout.groups[0].flat.add_(1.0)            # moves the parameters themselves
    assert torch.equal(stacked[0][0].detach(), refs[0][0].detach() + 1.0)


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_channels_last_parameters_keep_their_layout(kind):
    """The stacked FCAM's convolution weights are channels-last per seed (the kernels
    cuDNN/oneDNN pick depend on it): in the flat buffer they keep their strides, and
    the update still equals torch's per seed."""
    from minimal_attn.backends.vr.batched import stack_fcams, stacked_parameters
    from minimal_attn.backends.vr.models import build_fcam, focus_config, scaled

    model = stack_fcams([build_fcam(seed=s, focus_cfg=scaled(focus_config(start="mirror"),
                                                              0.25)) for s in range(3)])
    params = stacked_parameters(model)
    strides = [p.stride() for p in params]
    assert any(not p.is_contiguous() for p in params)           # channels-last weights
    refs = [[p[k].detach().clone().requires_grad_() for p in params] for k in range(3)]
    ours = StackedSGD(params) if kind == "sgd" else StackedAdam(params)
    opts = [(torch.optim.SGD(r, lr=lr, momentum=0.9) if kind == "sgd"
             else torch.optim.Adam(r, lr=lr)) for r, lr in zip(refs, LRS)]
    assert [p.stride() for p in params] == strides
    gen = torch.Generator().manual_seed(4)
    for _ in range(3):
        grads = [torch.randn(p.shape, generator=gen) for p in params]
        for p, g in zip(params, grads):
            p.grad = g.contiguous(memory_format=torch.preserve_format)
        ours.step(LRS)
        for k in range(3):
            for r, g in zip(refs[k], grads):
                r.grad = g[k].clone()
            opts[k].step()
    for k in range(3):
        for p, r in zip(params, refs[k]):
            assert torch.equal(p[k].detach(), r.detach())


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_resume_from_seed_states_is_exact(kind):
    """Per-seed state dicts loaded into a fresh optimizer continue bit for bit."""
    stacked, ours, _, _ = run_both(kind, [torch.float32], steps=3)
    copies = [p.detach().clone().requires_grad_() for p in stacked]
    fresh = (StackedSGD(copies, momentum=0.9) if kind == "sgd" else StackedAdam(copies))
    fresh.load_seed_state_dicts([ours.seed_state_dict(k, LRS[k]) for k in range(3)])
    gen = torch.Generator().manual_seed(9)
    for _ in range(2):
        grads = [torch.randn(p.shape, generator=gen) for p in stacked]
        for opt, ps in ((ours, stacked), (fresh, copies)):
            for p, g in zip(ps, grads):
                p.grad = g.clone()
            opt.step(LRS)
    for p, q in zip(stacked, copies):
        assert torch.equal(p.detach(), q.detach())


def optimizer_ops(kind, n_params):
    """Counter of the aten operators (outermost and nested) of one step over n_params."""
    import collections

    from torch.profiler import profile

    gen = torch.Generator().manual_seed(0)
    params = [torch.randn(3, 5, generator=gen).requires_grad_() for _ in range(n_params)]
    opt = StackedSGD(params) if kind == "sgd" else StackedAdam(params)
    for _ in range(2):
        for p in params:
            p.grad = torch.randn(p.shape, generator=gen)
        opt.step(LRS)
    with profile() as prof:
        opt.step(LRS)
    return collections.Counter(e.name for e in prof.events())


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_step_is_a_fixed_number_of_whole_buffer_operators(kind):
    """From 2 to 20 parameters only the gradient gather's views grow (no arithmetic)."""
    few, many = optimizer_ops(kind, 2), optimizer_ops(kind, 20)
    grown = {name for name in many if many[name] != few[name]}
    assert grown <= {"aten::reshape", "aten::view", "aten::_reshape_alias", "aten::permute",
                     "aten::as_strided"}, grown
    arithmetic = ("aten::mul_", "aten::addcmul_") + (
        ("aten::lerp_", "aten::sqrt", "aten::addcdiv_") if kind == "adam" else ())
    assert all(many[name] == 1 for name in arithmetic), many


def test_a_missing_gradient_and_uneven_steps_are_refused():
    params = [torch.zeros(3, 2, requires_grad=True), torch.zeros(3, requires_grad=True)]
    opt = StackedAdam(params)
    opt.step(LRS)                                    # no gradients: nothing to do
    assert opt.steps == [0, 0, 0]
    params[0].grad = torch.ones(3, 2)
    with pytest.raises(InputError, match="every stacked parameter needs a gradient"):
        opt.step(LRS)
    params[1].grad = torch.ones(3)
    opt.step(LRS)
    states = [opt.seed_state_dict(k, LRS[k]) for k in range(3)]
    states[1]["state"][0]["step"] = torch.tensor(5.0)
    with pytest.raises(InputError, match="different Adam steps"):
        StackedAdam([p.detach().clone() for p in params]).load_seed_state_dicts(states)
