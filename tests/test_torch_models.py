"""The CNNs of Appendix A.2 and the CNN FCAM (Section 2.4): shapes, uniform start, batching."""

import numpy as np
import pytest

from minimal_attn.errors import InputError

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from minimal_attn.backends import torch_backend as tb  # noqa: E402
from minimal_attn.backends.vr.models import (  # noqa: E402
    FCAM,
    ConvNet,
    build_fcam,
    classifier_config,
    focus_config,
    scaled,
)
from minimal_attn.backends.vr.train import dead_units  # noqa: E402

pytestmark = pytest.mark.usefixtures("torch_one_thread")


def _layers(net, kind):
    return [mod for mod in net.modules() if isinstance(mod, kind)]


@pytest.mark.parametrize("dataset,focus_layers,classifier_layers", [
    ("cifar10", (3, 4), (3, 4)), ("cifar100", (2, 2), (3, 3))])
def test_appendix_a2_architectures(dataset, focus_layers, classifier_layers):
    model = build_fcam(dataset, n_classes=7, seed=0)
    for net, (n_conv, n_fc) in ((model.focus, focus_layers),
                                (model.classifier, classifier_layers)):
        assert len(_layers(net, nn.Conv2d)) == n_conv
        assert len(_layers(net, nn.Linear)) == n_fc
    images = torch.randn(6, 3, 32, 32)
    assert model.focus(images).shape == (6, 1)
    assert model.classifier(images).shape == (6, 7)
    assert all(m.bias is None for m in _layers(model.focus, (nn.Conv2d, nn.Linear)))


@pytest.mark.parametrize("paradigm,logits_shape", [("sa", (4, 3)), ("ha", (4, 5, 3)),
                                                   ("lv", (4, 5, 3))])
def test_fcam_shapes(paradigm, logits_shape):
    model = build_fcam("cifar10", 3, seed=1)
    scores, logits = model(torch.randn(4, 5, 3, 32, 32), paradigm)
    assert scores.shape == (4, 5) and logits.shape == logits_shape
    with pytest.raises(InputError, match="hybrid"):
        model(torch.randn(1, 2, 3, 32, 32), "hybrid")


@pytest.mark.parametrize("dataset", ["cifar10", "cifar100"])
def test_focus_starts_uniform(dataset):
    # output layer at zero: every score 0, a = 1/m exactly, whatever the input
    model = build_fcam(dataset, 3, seed=3)
    X = 5 * torch.randn(3, 7, 3, 32, 32)
    scores = model.scores(X)
    assert torch.all(scores == 0)
    assert torch.all(tb.attention(scores) == 1 / 7)
    assert torch.count_nonzero(model.focus.output.weight) == 0
    # ... but the output layer does get a gradient, so the focus can learn
    scores, logits = model(X, "lv")
    tb.loss("lv", scores, logits, torch.tensor([0, 1, 2])).backward()
    assert torch.count_nonzero(model.focus.output.weight.grad) > 0


def test_chunked_equals_unchunked():
    torch.manual_seed(0)
    X = torch.randn(5, 4, 3, 32, 32, dtype=torch.float64)
    y = torch.tensor([0, 1, 2, 0, 1])
    outs = []
    for chunk in (None, 20, 7, 1):
        model = build_fcam("cifar10", 3, seed=4, chunk=chunk).double()
        with torch.no_grad():
            model.focus.output.weight.normal_(generator=torch.Generator().manual_seed(0))
        scores, logits = model(X, "ha")
        tb.loss("ha", scores, logits, y).backward()
        grads = [p.grad.clone() for p in model.parameters()]
        outs.append((scores.detach(), logits.detach(), grads))
    for scores, logits, grads in outs[1:]:
        torch.testing.assert_close(scores, outs[0][0], rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(logits, outs[0][1], rtol=1e-10, atol=1e-12)
        for g, g0 in zip(grads, outs[0][2]):
            torch.testing.assert_close(g, g0, rtol=1e-9, atol=1e-12)


def test_cpu_chunks_are_separate_calls():
    calls = []
    model = build_fcam("cifar10", 3, seed=0, chunk=6)
    model.classifier.register_forward_hook(lambda mod, inp, out: calls.append(inp[0].shape[0]))
    model(torch.randn(4, 4, 3, 32, 32), "ha")                  # 16 segments
    assert calls == [6, 6, 4]


def test_sa_classifies_the_attention_weighted_average():
    torch.manual_seed(1)
    model = build_fcam("cifar10", 3, seed=5).double()
    with torch.no_grad():
        model.focus.output.weight.normal_()
    X = torch.randn(3, 4, 3, 32, 32, dtype=torch.float64)
    scores, logits = model(X, "sa")
    a = torch.softmax(scores, dim=1)
    x_tilde = (a[:, :, None, None, None] * X).sum(dim=1)        # g(sum_j a_j x_j)
    torch.testing.assert_close(logits, model.classifier(x_tilde))
    # g is nonlinear: averaging the inputs is not averaging the per-segment outputs
    per_segment = model.segment_logits(X)
    assert not torch.allclose(logits, (a[..., None] * per_segment).sum(1), atol=1e-6)
    # with all attention on segment z, SA classifies x_z alone
    la = torch.full((3, 4), -float("inf"), dtype=torch.float64)
    la[torch.arange(3), torch.tensor([0, 3, 1])] = 0.0
    _, logits_one = model(X, "sa", la)
    torch.testing.assert_close(logits_one, per_segment[torch.arange(3), [0, 3, 1]])


@pytest.mark.parametrize("rule", ["sa", "ha", "hybrid", "lv"])
def test_predict_matches_the_inference_rules(rule):
    torch.manual_seed(2)
    model = build_fcam("cifar10", 3, seed=6).double()
    with torch.no_grad():
        model.focus.output.weight.normal_()
    X = torch.randn(4, 5, 3, 32, 32, dtype=torch.float64)
    scores, s = model.predict(X, rule)
    _, logits = model(X, "sa" if rule == "sa" else "ha")
    torch.testing.assert_close(s, tb.infer(rule, scores, logits))


def test_initialisation_depends_only_on_seed():
    torch.manual_seed(123)
    a = build_fcam("cifar10", 3, seed=7)
    torch.manual_seed(456)
    b = build_fcam("cifar10", 3, seed=7)
    c = build_fcam("cifar10", 3, seed=8)
    for pa, pb in zip(a.parameters(), b.parameters()):
        assert torch.equal(pa, pb)
    assert not torch.equal(a.classifier.output.weight, c.classifier.output.weight)


def test_scaled_width_and_flat_size():
    cfg = scaled(classifier_config("cifar10", 4), 0.25)
    # the convolutions and the 512-unit layer scale; the 64- and 10-unit layers keep
    # the paper's width (shrunk to 16 and 2 they started dead on some seeds)
    assert cfg.conv_channels == (8, 16, 16) and cfg.fc_widths == (128, 64, 10)
    assert scaled(focus_config("cifar100"), 0.1).fc_widths == (64,)
    assert scaled(focus_config("cifar10"), 0.01).conv_channels == (8, 8, 8)
    assert cfg.flat_size() == 16 * 4 * 4
    assert focus_config("cifar100").flat_size() == 64 * 6 * 6
    assert ConvNet(cfg)(torch.randn(2, 3, 32, 32)).shape == (2, 4)
    assert scaled(cfg, 1.0) is cfg
    with pytest.raises(InputError):
        scaled(cfg, 0.0)


def test_fixed_attention_skips_the_focus():
    model = FCAM(None, ConvNet(classifier_config("cifar10", 3)))
    la = torch.log(torch.full((2, 3), 1 / 3))
    scores, logits = model(torch.randn(2, 3, 3, 32, 32), "lv", la)
    assert scores is la and logits.shape == (2, 3, 3)
    assert np.isfinite(float(tb.loss("lv", scores, logits, torch.tensor([0, 2])).detach()))


def test_dead_unit_report_counts_units_built_dead():
    cfg = focus_config("cifar10")                        # no biases, like the paper's focus
    net = ConvNet(scaled(cfg, 0.25), torch.Generator().manual_seed(0))
    linears = [layer for layer in net.body if isinstance(layer, nn.Linear)]
    with torch.no_grad():
        # inputs of fc2 are ReLU outputs (>= 0): all-negative rows can never fire
        linears[1].weight[:5] = -linears[1].weight[:5].abs() - 0.01
        net.body[0].weight[3] = 0.0                       # a conv channel that outputs 0
    report = dead_units(net, torch.rand(40, 3, 32, 32))
    assert [name for name, _, _ in report] == ["conv1", "conv2", "conv3", "fc1", "fc2", "fc3"]
    assert [units for _, _, units in report] == [8, 16, 16, 128, 64, 10]
    assert report[0][1] == 1                                # the zeroed channel
    assert report[4][1] >= 5                                # the five negative rows
    with torch.no_grad():
        linears[2].weight[:] = -linears[2].weight.abs() - 0.01
    assert dead_units(net, torch.rand(40, 3, 32, 32))[5][1] == 10


def test_reduced_width_keeps_last_hidden_layers_alive_on_cifar(shared_data):
    from minimal_attn.datasets.mosaics import to_float_images
    from minimal_attn.datasets.splits import load_mosaic_splits

    train = load_mosaic_splits("cifar10", 5, 40, 1, data_dir=shared_data / "cifar10").train
    images = torch.as_tensor(to_float_images(train.X.reshape(-1, 3, 32, 32)))  # (200, ...)
    for seed in range(5):
        model = build_fcam("cifar10", 3, seed, None, "cpu",
                           scaled(focus_config("cifar10"), 0.25),
                           scaled(classifier_config("cifar10", 3), 0.25))
        for net in (model.focus, model.classifier):
            report = dead_units(net, images)
            for name, dead, units in report[-2:]:         # the 64- and 10-unit layers
                assert dead <= units // 2, (seed, name, dead, units)


def test_fcam_cost_counts_the_flops_torch_counts():
    """The bound's FLOPs per mosaic against torch's own FLOP counter, forward and backward,
    for the paper's and the authors' networks (hand count of LeNet's forward as well)."""
    from torch.utils.flop_counter import FlopCounterMode

    from minimal_attn.backends.vr.cost import bound_report, forward_macs, train_flops_per_mosaic

    lenet = classifier_config("cifar10", 3, kind="lenet")
    assert forward_macs(lenet) == (28 * 28 * 6 * 75 + 10 * 10 * 16 * 150 + 400 * 120
                                   + 120 * 84 + 84 * 10 + 10 * 3)
    for classifier in (classifier_config("cifar10", 3), lenet):
        model = build_fcam("cifar10", 3, 0, classifier_cfg=classifier)
        X, y = torch.randn(2, 5, 3, 32, 32), torch.tensor([0, 2])
        for paradigm in ("sa", "lv"):
            with FlopCounterMode(display=False) as counter:
                tb.loss(paradigm, *model(X, paradigm), y).backward()
            ours = 2 * train_flops_per_mosaic(focus_config(), classifier, 5, paradigm)
            # torch also skips the first convolution's input gradient: ours is an upper bound
            assert 0.9 * ours <= counter.get_total_flops() <= ours
    line = bound_report(10_000, focus_config(), lenet, 5, "sa", "NVIDIA H100 80GB HBM3")
    assert "of the FP32 peak" in line and "mosaics/s" in line and "BF16" not in line
    # 10,000 mosaics/s of SA: achieved TFLOP/s over the H100's published 989.4 bf16 peak
    half = bound_report(10_000, focus_config(), lenet, 5, "sa", "NVIDIA H100 80GB HBM3", "bf16")
    achieved = 10_000 * train_flops_per_mosaic(focus_config(), lenet, 5, "sa") / 1e12
    assert f"{100 * achieved / 989.4:.1f}% of the BF16 peak" in half
    # the PCIe and NVL parts have lower peaks than the SXM ones PEAKS holds
    for name in ("NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA H200 NVL"):
        assert "no published peak" in bound_report(10_000, focus_config(), lenet, 5, "sa",
                                                   name)
    assert "of the FP32 peak" in bound_report(10_000, focus_config(), lenet, 5, "sa",
                                              "NVIDIA H200")
