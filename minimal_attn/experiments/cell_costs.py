r"""How long a cell takes on a card: the estimate behind ``cells list`` and gpu_cells.sh.

:func:`estimate_seconds` is the expected wall time of one cell (or part) alone on
a card, from the work of the cell and measured step times. For a cell with a stop
rule it is an upper bound: every seed is counted to its last allowed epoch.
"""

from minimal_attn.errors import InputError
from minimal_attn.experiments import cell_runners

#: One training step of the CNN FCAM with S seeds batched as one model (batch 100
#: per seed, the authors' networks, Adam, grouped_nchw eager) in ms:
#: ``fixed + per_seed * S * m / 5`` (on the CPU see :data:`M_EXPONENT`). H200
#: (benchmarks/README.md, 2026-11-27, HA at m = 5, the step of 128 leaf operators):
#: twelve seeds 14.36 ms a training step (``--profile``), three 5.68 ms (the step
#: probe's 50,008 mosaics/s, its test evaluation taken out: its train evaluation and loss
#: probe are in, about a fifth of it on the CPU), so 2.8 + 0.96 S (on
#: 2026-11-26 the step of 299 operators had taken 6.1 + 1.97 S). H100: the H200's
#: times / 0.75 (memory bandwidth, 3.35 against 4.8 TB/s; not measured). cpu: the
#: 2-core machine, one thread per run, about 350 mosaics/s a seed (SA at width 1), no
#: fixed part. Cells side by side on a card run each slower than this estimate of a
#: cell alone (:func:`shared_slowdown`).
STEP_MS = {"h100": (3.7, 1.28), "h200": (2.8, 0.96), "cpu": (0.0, 286.0)}
#: The paradigm of those measurements, with the authors' LeNet classifier: other networks
#: and paradigms scale the per-seed part by their FLOPs (:func:`fcam_work`).
CALIBRATION = {"h100": "ha", "h200": "ha", "cpu": "sa"}
#: The per-seed part grows as ``(m / 5) ** M_EXPONENT``. On the CPU, faster than m: SA
#: trained 265-290 ms a step per seed at m = 5 (the released parts, 2026-11-27) and
#: 1.76 s at m = 20 (cpu-t1-cifar10-m20-authors-long-sa, its evaluations taken out),
#: 6.4 times for 4 times the segments (LV 1.2x SA's at m = 20); on a card not measured
#: at m = 20, so linear.
M_EXPONENT = {"h100": 1.0, "h200": 1.0, "cpu": 1.35}
#: A CNN FCAM epoch of a paradigm against HA's. The hybrid: its seeds switch at different
#: epochs, and a step with seeds in both phases runs as two (:class:`.BatchedSeeds`);
#: cut by the same time limit on an H200 (2026-11-26), its 12-seed cell ran 53 epochs
#: where HA's ran 59. The others cost their FLOPs (:func:`fcam_work`).
FCAM_PARADIGM_COST = {"hybrid": 59 / 53}
#: How much more work four processes side by side get through on one card than one
#: alone (:func:`shared_slowdown`). CNN FCAM cells: the four parts of
#: t1-cifar10-m5-authors-ha (3 seeds, 200 epochs, the CUDA-graph step) together took
#: 365 s each on an H200 (2026-11-27) where :data:`STEP_MS` and the probe's 1.20x give
#: 97.5 s alone: 1.07, the card already busy. Processes whose host launches set the
#: pace share a card better: four 12-seed cells of the 299-operator step 1.85
#: (2026-11-26), taken for the LSTM models of an agreement row (not measured for them).
SHARED_SPEEDUP_AT_4 = {"cnn": 1.07, "host_bound": 1.85}
CARDS = tuple(STEP_MS)
#: Seconds per unit of work of the other cells, from what was measured (rough):
#: * hatexplain: one seed-epoch of the text FCAM by embedding, everything of the cell
#:   included (CPU, 2026-11-26, the paper-size cells: 12 seeds x 10 epochs took 49-65 s with
#:   the standard embedding and about 200 s with self-attention; GPU: assumed 3x faster,
#:   not yet measured);
#: * agreement: one step of one of the models of a row (4 for SST-2, 3 for Multi30k),
#:   everything else of the row included, at the paper's widths (CPU, two threads: the
#:   paper-size SST-2 row, t2-sst2, took 1,029 s, 0.065 s a step all in; the Multi30k row,
#:   t2-multi30k, 0.125-0.13 s a step with its evaluations, the proxy 117 s; H200 before the
#:   host-side speed-ups: 1,000 steps of the SST-2 row did not finish in 120 s, most of
#:   it the proxy on the host, so at most 0.03 s a step is assumed, and twice that for
#:   translation; not yet measured);
#: * synthetic: one step of 40 runs (20 seeds of two conditions, one model) at the paper's
#:   size (H200: `synthetic copy --paper-size --seeds 20 --steps 500` took 66 s); the
#:   multi-head cell counted in one-head runs (MULTIHEAD_RUN). On a card a step of R runs
#:   is not R/40 of it: see SYNTHETIC_FIXED.
UNIT_SECONDS = {"hatexplain": {"h100": {"standard": 0.18, "self-attention": 0.55},
                               "h200": {"standard": 0.18, "self-attention": 0.55},
                               "cpu": {"standard": 0.55, "self-attention": 1.65}},
                "agreement": {"h100": {"classify": 0.04, "translate": 0.08},
                              "h200": {"classify": 0.03, "translate": 0.06},
                              "cpu": {"classify": 0.065, "translate": 0.13}},
                "synthetic": {"h100": 0.17, "h200": 0.13, "cpu": 6.0}}
#: The synthetic unit on the CPU at the CPU size (H = 32): cpu-multihead-8 (24 candidates
#: and 18 runs of 8 heads, 1,000 steps) took 372 s on one thread beside another run.
SMALL_SYNTHETIC_CPU_UNIT = 0.33
#: The part of the synthetic unit a step costs whatever its runs (s), on a card: what the
#: host spends launching its operators. H200, H = 256 (bench_synthetic_seeds): one run
#: 40 ms a step, 20 runs batched 52 ms, so (39.4 + 0.66 R) ms, 60% of a 40-run step
#: fixed; taken as the host's, the same on both cards (the per-run rest scales with the
#: card, as the unit does). On the CPU a step is proportional to its runs.
SYNTHETIC_FIXED = {"h100": 0.6 * 0.13, "h200": 0.6 * 0.13, "cpu": 0.0}
#: HA, LV and the hybrid against SA, per step: they compute the output at every source
#: position (Snell Eq. (4)). On the CPU that cost 3-10x SA's (examples/both_papers.py;
#: 2.8x at H = 32). On a card, where the launches dominate, one step has 1.03x SA's
#: operators (3,643 against 3,539, torch profiler, one HA step of the copy task) and
#: the per-position products add work the card does quickly: 1.2 assumed, not measured.
PER_POSITION = {"h100": 1.2, "h200": 1.2, "cpu": 5.0}
#: One multi-head run (8 heads) in one-head runs of the synthetic unit (assumed, not
#: measured: the LSTMs dominate a step); the whole multi-head cell, its 48 candidates
#: screened and 3 x 20 runs trained, then costs 3 units of 20 seeds x 2 conditions.
MULTIHEAD_RUN = 1.2
#: A job's working time: cells longer than this on a card need more than one job.
JOB_SECONDS = 480


#: A stop rule's expected epochs: the most a finished sibling cell took, times this. On
#: the CPU (SA, 3 seeds, 3,000 mosaics) the released data stopped at epochs 48-60 where
#: the authors' recipe on held-out images stopped at 35-51: 1.2-1.3x later.
STOP_MARGIN = 1.5


def stop_rule_epochs(cell, records, cells_by_name):
    """Epochs a CNN FCAM cell with a stop rule is expected to take at most, from the
    complete records of its *siblings*: cells of the same scale, data set, m and paradigm
    whose protocol trains the same way (``authors`` and ``released`` differ only in
    their data, :data:`.config.CIFAR_ONLY`) and whose every seed met the stop rule: the
    latest epoch one stopped at, times :data:`STOP_MARGIN`, at most the cell's epochs
    (its own setting, else its protocol's). None without a stop rule or such a sibling
    (the estimate then counts every allowed epoch).

    ``records``: results-store records; ``cells_by_name``: the catalogue
    (:func:`.cells.all_cells`), to read each record's cell."""
    import math

    from minimal_attn.experiments import cell_parts
    from minimal_attn.experiments.config import CIFAR_ONLY, PROTOCOLS

    s = cell.settings
    if s.get("runner") != "fcam" or PROTOCOLS.get(s.get("protocol"), {}).get("stop_loss") is None:
        return None

    def recipe(protocol):
        return {k: v for k, v in PROTOCOLS.get(protocol, {}).items() if k not in CIFAR_ONLY}

    most = None
    for record in records:
        other = cells_by_name.get(cell_parts.split_name(record["cell"])[0])
        if other is None or not cell_parts.complete(record):
            continue
        o = other.settings
        if (other.scale, o.get("runner"), o.get("dataset"), o.get("m"), o.get("paradigm")) \
                != (cell.scale, "fcam", s["dataset"], s["m"], s["paradigm"]) or \
                recipe(o.get("protocol")) != recipe(s["protocol"]):
            continue
        stopped = record["result"].get("stopped_epochs") or {}
        if stopped and None not in stopped.values():    # a seed that ran out says nothing
            most = max(most or 0, max(stopped.values()))
    if most is None:
        return None
    cap = s.get("epochs", PROTOCOLS[s["protocol"]]["epochs"])    # the cell's own, if set
    return min(math.ceil(most * STOP_MARGIN), cap)


def check_card(card):
    """Refuse a card the cost model has no times for, in one line."""
    if card not in CARDS:
        raise InputError(f"card must be one of {', '.join(CARDS)}, got {card!r}",
                         param="card")


def estimate_seconds(cell, card, epochs=None):
    """Expected wall time of ``cell`` on ``card`` (h100, h200, cpu), from its work;
    ``epochs`` (CNN FCAM cells): the epochs expected instead of all the protocol allows
    (:func:`stop_rule_epochs`)."""
    check_card(card)
    s = cell.settings
    if s["runner"] == "fcam":
        c = cell_runners.fcam_config(cell, data_dir=None, device="cpu")
        step = fcam_step_seconds(card, c.seeds, c.m, c.batch_size,
                                 fcam_work(c, s["paradigm"], card))
        steps = (epochs or c.epochs) * -(-c.n_train // c.batch_size)
        # plus a test evaluation every eval_every epochs (forward only: ~1/3 of a step)
        cost = FCAM_PARADIGM_COST.get(s["paradigm"], 1.0)
        return steps * step * cost * (1 + c.n_test / (3 * c.eval_every * c.n_train))
    unit = UNIT_SECONDS[s["runner"]][card]
    if s["runner"] == "hatexplain":
        return s["seeds"] * s["epochs"] * unit[s["embedding"]]
    if s["runner"] == "agreement":
        per_model = (cell_runners.TINY_AGREEMENT["steps"] if s.get("size") == "tiny" else
                     {"classify": 4000, "translate": 20000}[s["task"]])
        # the row's models: standard, second, uniform (and frozen, classification only)
        models = 4 if s["task"] == "classify" else 3
        steps = models * per_model * unit[s["task"]]
        # on a card the row's models train side by side (cell_runners: --workers 6), taken
        # to share it as host-bound processes do (shared_slowdown; not measured for LSTMs)
        share = models / shared_slowdown(models, SHARED_SPEEDUP_AT_4["host_bound"])
        return steps / (share if card != "cpu" else 1) + 60
    size = cell_runners.synthetic_size(s)
    if card == "cpu" and s["size"] != "paper":
        unit = SMALL_SYNTHETIC_CPU_UNIT        # on a card a small LSTM costs what launches do
    paradigm = 1.0 if s.get("paradigm", "sa") == "sa" else PER_POSITION[card]
    if s["task"] == "copy":              # permutation and control, 20 seeds of each a unit
        runs = 2 * s["seeds"]
    else:    # the multi-head cell in one-head runs: its screened candidates and its three
        #   scenarios' runs of 8 heads each (MULTIHEAD_RUN); a part has one phase or none
        runs = {"screen": s.get("candidates", 0), "train": 3 * s["seeds"] * MULTIHEAD_RUN,
                None: s["pool"] + 3 * s["seeds"] * MULTIHEAD_RUN}[s.get("phase")]
    fixed = SYNTHETIC_FIXED[card]
    return size["steps"] * (fixed + (unit - fixed) * runs / 40) * paradigm


def fcam_step_seconds(card, seeds, m, batch_size, work=1.0):
    """One eager training step of ``seeds`` CNN FCAMs batched, by :data:`STEP_MS`: the fixed
    part (launches) whatever the batch, the per-seed part in proportion to the batch and
    to ``work``, the FLOPs of a mosaic against the calibration's (:func:`fcam_work`)."""
    fixed, per_seed = STEP_MS[card]
    segments = (m / 5) ** M_EXPONENT[card]
    return (fixed + per_seed * seeds * segments * work * batch_size / 100) / 1000


def fcam_work(config, paradigm, card):
    """A mosaic's training FLOPs for ``config``'s networks (classifier, width) and
    ``paradigm`` against those :data:`STEP_MS` was measured with on ``card``
    (:data:`CALIBRATION`), both at m = 5 (:data:`M_EXPONENT` scales m): e.g. the paper's
    classifier on HA does 1.77 times the authors' LeNet's work, SA with LeNet 0.91."""
    from minimal_attn.backends.vr.architectures import classifier_config, focus_config, scaled
    from minimal_attn.backends.vr.cost import train_flops_per_mosaic

    def flops(classifier, paradigm, width=1.0):
        return train_flops_per_mosaic(
            scaled(focus_config(config.dataset), width),
            scaled(classifier_config(config.dataset, config.n_classes, classifier), width),
            5, paradigm)
    loss = "ha" if paradigm == "hybrid" else paradigm     # its two phases: FCAM_PARADIGM_COST
    return flops(config.classifier, loss, config.width) / flops("lenet", CALIBRATION[card])


def shared_slowdown(parallel, speedup_at_4=SHARED_SPEEDUP_AT_4["cnn"]):
    """How much slower each of ``parallel`` processes side by side on one card runs than
    alone, when together they get through ``speedup_at_4`` times one's work at four
    (:data:`SHARED_SPEEDUP_AT_4`), taken linear from one to four."""
    return parallel / (1 + (speedup_at_4 - 1) / 3 * (parallel - 1))


def plan_job(estimates, budget, parallel=1, force=False, min_start=150, margin=0):
    """What a job of ``budget`` seconds would run: ``[(name, state)]`` for the
    ``(name, seconds alone)`` pairs ``estimates``, in order, ``parallel`` at a time.

    The rules of benchmarks/gpu_cells.sh: a cell starts in the first slot to come
    free; the first ``parallel`` cells always start; a later one is skipped when
    under 20 s are left, when it would not finish in the time left (its estimate
    times :func:`shared_slowdown`; ``force`` lifts this rule) or when under
    ``min_start`` seconds are left. A cell that runs takes its estimate, or what is
    left of the budget, whichever is less; it is cut short when its estimate is over
    what is left less ``margin`` (the script stops training that long before the end).
    """
    return [(name, _state(start, cut, reason, budget))
            for name, start, cut, reason in _simulate(estimates, budget, parallel, force,
                                                      min_start, margin)]


def _state(start, cut, reason, budget):
    if start is None:
        return reason
    return f"would run from {start:.0f} s" + (", cut by the budget" if cut else "")


def _simulate(estimates, budget, parallel, force, min_start, margin):
    """``(name, start or None, cut, reason skipped)`` per cell under plan_job's rules."""
    free = [0.0] * parallel
    slow = shared_slowdown(parallel)
    rows, started = [], 0
    for name, seconds in estimates:
        slot = min(range(parallel), key=free.__getitem__)
        left = budget - free[slot]
        need = seconds * slow
        if left < 20:
            rows.append((name, None, False, "would not start (budget spent)"))
            continue
        if started >= parallel and not force and need > left:
            rows.append((name, None, False,
                         f"would skip (estimate {need:.0f} s over the {left:.0f} s left)"))
            continue
        if started >= parallel and left < min_start:
            rows.append((name, None, False, f"would skip (only {left:.0f} s left)"))
            continue
        started += 1
        free[slot] += min(need, left)
        rows.append((name, budget - left, need > left - margin, None))
    return rows


def choose_parallel(estimates, budget, most=4, force=False, min_start=150, margin=60):
    """``gpu_cells.sh --parallel auto``: how many cells to run side by side, 1..``most``.

    The count under which most cells of ``estimates`` (``(name, seconds alone)``)
    finish inside ``budget`` by :func:`plan_job`'s rules, a cell finishing when its
    estimate beside the others fits the time left less ``margin``; a tie goes to
    more cells side by side (more of the card used). Four CNN cells side by side each
    run almost four times slower than alone (:func:`shared_slowdown` of the measured
    :data:`SHARED_SPEEDUP_AT_4`), so when the first cells are long, fewer at once finish
    more of them rather than cutting all four short.
    Returns ``(parallel, cells that finish)``.
    """
    best = None
    for p in range(1, most + 1):
        done = sum(start is not None and not cut for _, start, cut, _ in
                   _simulate(estimates, budget, p, force, min_start, margin))
        if best is None or done >= best[1]:
            best = (p, done)
    return best
