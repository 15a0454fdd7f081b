r"""The physical bound of CNN FCAM training: FLOPs and bytes per mosaic, and a card's peak.

Vashisht & Ramaswamy (2023), Appendix A.2 networks (:mod:`.models`). A
benchmark's mosaics/s means little without the ceiling it runs under:
:func:`train_flops_per_mosaic` counts the multiply-adds of one training step
per mosaic from the networks' configurations (forward, then about twice that
for the backward pass), :func:`activation_bytes_per_mosaic` the float32
activations a step writes and reads back, and :data:`PEAKS` holds the
published peaks of the cards we are lent. :func:`bound_report` turns a
measured throughput into the fraction of the compute bound it reaches.
"""

#: Published dense peaks (SXM parts): FP32 and TF32 tensor-core TFLOP/s, HBM TB/s.
PEAKS = {"H100": {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "hbm": 3.35},
         "H200": {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "hbm": 4.8}}


def card_peaks(card_name):
    """:data:`PEAKS` of the SXM card ``card_name`` names (as torch gives it, e.g. "NVIDIA
    H100 80GB HBM3"); None for others, the PCIe and NVL variants included (lower peaks)."""
    name = card_name or ""
    if any(variant in name for variant in ("PCIe", "NVL")):
        return None
    return next((v for k, v in PEAKS.items() if k in name), None)


def forward_macs(config):
    """Multiply-adds of one image through a :class:`.models.CNNConfig` network."""
    size, channels, macs = config.image_size, config.in_channels, 0
    for i, out in enumerate(config.conv_channels):
        size -= config.kernel - 1                                # unpadded convolution
        macs += size * size * out * channels * config.kernel ** 2
        channels = out
        if i < 2:
            size //= 2                                           # 2x2 max-pool
    width = config.flat_size()
    for hidden in tuple(config.fc_widths) + (config.out_dim,):
        macs += width * hidden
        width = hidden
    return macs


def activation_floats(config):
    """Floats a network writes per image (convolution outputs before pooling, fc outputs)."""
    size, total = config.image_size, 0
    for i, out in enumerate(config.conv_channels):
        size -= config.kernel - 1
        total += size * size * out
        if i < 2:
            size //= 2
    return total + sum(config.fc_widths) + config.out_dim


def train_flops_per_mosaic(focus, classifier, m, paradigm):
    """FLOPs of one training step per mosaic of m segments (2 FLOPs a multiply-add).

    The focus scores every segment; SA classifies one blended image, HA and LV
    every segment. The backward pass costs about twice the forward (gradients
    with respect to inputs and to weights); the first convolution needs no
    input gradient, which this bound ignores.
    """
    images = 1 if paradigm == "sa" else m
    forward = m * forward_macs(focus) + images * forward_macs(classifier)
    return 3 * 2 * forward


def activation_bytes_per_mosaic(focus, classifier, m, paradigm):
    """float32 bytes a training step moves per mosaic: the input pixels once, each
    activation written in the forward pass and read back in the backward pass."""
    images = 1 if paradigm == "sa" else m
    pixels = m * focus.in_channels * focus.image_size ** 2
    floats = pixels + 2 * (m * activation_floats(focus) + images * activation_floats(classifier))
    return 4 * floats


def bound_report(mosaics_per_s, focus, classifier, m, paradigm, card_name, precision="fp32"):
    """One line: FLOPs and bytes per mosaic, achieved TFLOP/s, and its share of the peaks
    (with ``precision`` bf16 also of the BF16 peak; bytes stay those of float32)."""
    flops = train_flops_per_mosaic(focus, classifier, m, paradigm)
    nbytes = activation_bytes_per_mosaic(focus, classifier, m, paradigm)
    achieved = mosaics_per_s * flops / 1e12
    line = (f"{flops / 1e6:.1f} MFLOP and {nbytes / 1e6:.2f} MB per mosaic; "
            f"{achieved:.2f} TFLOP/s achieved")
    peak = card_peaks(card_name)
    if peak is None:
        return line + f" (no published peak for {card_name!r})"
    compute = 1e12 * peak["tf32"] / flops                      # mosaics/s at the TF32 peak
    memory = 1e12 * peak["hbm"] / nbytes                       # mosaics/s at the HBM peak
    return (line + f" = {100 * achieved / peak['fp32']:.1f}% of the FP32 peak "
            f"({peak['fp32']:g} TFLOP/s), {100 * achieved / peak['tf32']:.1f}% of TF32 "
            f"({peak['tf32']:g}); bound {min(compute, memory):,.0f} mosaics/s "
            f"({'memory' if memory < compute else 'compute'}-bound at TF32 and "
            f"{peak['hbm']:g} TB/s)"
            + (f"; {100 * achieved / peak['bf16']:.1f}% of the BF16 peak ({peak['bf16']:g})"
               if precision == "bf16" else ""))
