"""Help texts of ``attn-dyn train`` that are read from the library's presets (kept out of
:mod:`.train_cmd`, so that its options stay readable).

Every number is read from :class:`~minimal_attn.experiments.config.ExperimentConfig` and
:data:`~minimal_attn.experiments.config.PROTOCOLS`, so the help cannot drift from them.
"""

from minimal_attn.experiments.config import PROTOCOLS, ExperimentConfig
from minimal_attn.experiments.train_loop import ADAM_LR

D = ExperimentConfig()

#: How the help of every option refused with ``--dataset hatexplain`` begins (mosaic data
#: sets only; ``CNN``: the torch FCAM on image mosaics). tests/test_cli_ux.py checks that
#: exactly those options carry one, here and in docs/train.md.
MOSAIC_MARKS = ("Mosaics:", "CNN:", "CNN, with --batch-seeds:", "CIFAR:",
                "synthetic / linear-orthogonal:")


def _preset(name):
    """The settings of protocol ``name``, in words (its lr aside)."""
    p = PROTOCOLS[name]
    adam = f"{ADAM_LR['sa']:.0e}".replace("e-0", "e-")           # 5e-4
    optimizer = "SGD" if p["optimizer"] == "sgd" else f"Adam {adam}"
    stop = f"at most {p['epochs']} epochs, stop at loss {p['stop_loss']:g}" \
        if p["stop_loss"] else f"{p['epochs']} epochs"
    return (f"{optimizer}, {p['classifier']} classifier, {p['focus_init']} start, batch "
            f"{p['batch_size']}, {stop}, {p['seeds']} seeds, {p['n_train']['cifar10']:,} "
            f"train mosaics or {p['n_train']['cifar100']:,} for CIFAR-100, {p['n_test']:,} "
            f"test mosaics")


PROTOCOL_HELP = (
    f"Mosaics: a preset of the options it names; options given explicitly win. Without it "
    f"each option keeps its own default: {D.optimizer.upper()} at the paper's rates, "
    f"{D.classifier} classifier, {D.focus_init} start, batch {D.batch_size}, {D.epochs} "
    f"epochs, {D.seeds} seed, {D.n_train:,} train and {D.n_test:,} test mosaics (a quick "
    f"run, not the paper's size). paper: Appendix A.2 as written, at the paper's rates "
    f"({_preset('paper')}; batch and epochs are not in the paper). authors: the "
    f"authors' released code ({_preset('authors')}). released: authors, with the data as "
    f"their notebooks make it (--pixels half, --test-images train).")
