"""The step probe of ``benchmarks/gpu_cells.sh`` (``GPU_CELLS_COMPILE=auto``): which way the
CNN FCAM cells of a job run their steps, and how much faster than :mod:`.cell_costs`
expects, from ``bench_batched_seeds.py``'s timings of a part-sized step on the card.
"""

from minimal_attn.errors import InputError
from minimal_attn.experiments.cell_costs import check_card, fcam_step_seconds

#: Ways a batched CNN step can run besides eager, in order of preference on a tie.
CAPTURED = ("cudagraph", "compile")


def pick_step(variants, tests_passed, min_gain=1.1, baseline="grouped_nchw"):
    """How the CNN FCAM cells of a job should run their steps (``gpu_cells.sh``'s
    ``GPU_CELLS_COMPILE=auto``): ``(conv mode, way, speed-up, reason)``.

    ``variants`` maps the names ``bench_batched_seeds.py --json`` writes ("batched
    (grouped_nchw)", "batched (loop, cudagraph)", ...: a conv mode of
    ``batched.MODES``, then a way of :data:`CAPTURED` or none for eager) to
    ``{"seconds": ...}``; the speed-up is against ``baseline`` run eagerly, the way the
    results so far ran. The fastest variant is taken when the card passed the
    equality tests of the modes and captured steps (``tests_passed``) and it is at
    least ``min_gain`` times as fast as the baseline; else the baseline.
    """
    base = f"batched ({baseline})"
    if base not in variants:
        raise InputError(f"the step probe must time the baseline {base!r}, got "
                         f"{sorted(variants)}", param="variants")
    gains = {}
    for name, v in variants.items():
        mode, *how = name[len("batched ("):].rstrip(")").split(", ")
        if name != base and len(how) <= 1 and set(how) <= set(CAPTURED):
            gains[mode, how[0] if how else "none"] = variants[base]["seconds"] / v["seconds"]
    if not gains:
        return baseline, "none", 1.0, "eager: nothing but the baseline was timed"
    # a tie goes to the baseline's mode, then to the simplest way: eager, then the CUDA
    # graph (no compiler in the way)
    ways = ("none",) + CAPTURED
    best = max(gains, key=lambda k: (gains[k], k[0] == baseline, -ways.index(k[1])))
    shown = ", ".join(f"{m}{'' if h == 'none' else ' ' + h} {g:.2f}x"
                      for (m, h), g in gains.items())
    if not tests_passed:
        return baseline, "none", 1.0, ("eager: the equality tests did not pass on this "
                                       f"card ({shown})")
    if gains[best] < min_gain:
        return baseline, "none", 1.0, f"eager: no way is {min_gain:.2f}x faster ({shown})"
    mode, way = best
    return mode, way, gains[best], (f"{mode}, {way}: {gains[best]:.2f}x {baseline} eager, "
                                    f"tests passed ({shown})")


def variant_name(mode, way):
    """The probe's name of ``mode`` run ``way`` (none: eager), as :func:`pick_step` reads it."""
    return f"batched ({mode})" if way == "none" else f"batched ({mode}, {way})"


def probe_scale(probe, variant, card):
    """How many times faster the probe ran ``variant`` (the way the cells will run, a name
    of ``probe["variants"]``, :func:`variant_name`) than
    :func:`.cell_costs.fcam_step_seconds` says an eager step on ``card`` runs: the job's
    CNN FCAM estimates are divided by it.

    Against the model, not the probe's own eager baseline: the eager time on the card
    varies more than the captured one (on an H200, ``grouped_nchw`` eager took 6.0 ms a
    step on 2026-11-27 and 9.0 ms on 2026-11-28, its CUDA graph 5.1 and 5.2 ms), so the
    ratio of the two overstated the cells' speed by 1.6x and the job cut two parts short.
    The probe's evaluations are left out of the model's time, which makes the scale a
    little low (the estimates a little long). ``probe``: ``bench_batched_seeds.py
    --json``'s dict; one probed at another width than the cells' (the CPU's smoke probe)
    gives None.
    """
    check_card(card)
    if probe.get("width", 1.0) != 1.0:
        return None
    steps = probe["epochs"] * -(-probe["n_train"] // probe["batch"])
    model = steps * fcam_step_seconds(card, probe["seeds"], probe["m"], probe["batch"])
    return model / probe["variants"][variant]["seconds"]
