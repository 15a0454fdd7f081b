"""``attn-dyn ibm1`` and ``attn-dyn proxy``: the second paper's NumPy side on parallel text.

Snell et al. (2021), Sections 2.3 and 4: IBM Model 1 (EM of Brown et al.,
1993) and the bag-of-words proxy model, compared with the agreement of Snell Eq. (10).
The work is done by :mod:`minimal_attn.experiments.text`.
"""

import json

import click

from minimal_attn.cli.options import CONTEXT, ProgressBar, config, default
from minimal_attn.experiments.text import TOKENIZERS, Ibm1Config, ProxyExperiment
from minimal_attn.proxy import ProxyConfig


@click.command(context_settings=CONTEXT)
@click.option("--src", required=True, metavar="FILE",
              help="Source text, one sentence per line (the side that predicts).")
@click.option("--tgt", required=True, metavar="FILE",
              help="Target text, line-aligned with --src (the side that is predicted).")
@click.option("--iterations", "-k", type=int, default=default(Ibm1Config, "iterations"),
              show_default=True,
              help="EM iterations, starting from the uniform table t(o|i) = 1/|O|.")
@click.option("--no-null", is_flag=True,
              help="Leave out the NULL source word (Brown et al.'s e_0).")
@click.option("--out", metavar="FILE", default=None,
              help="Write every non-zero t(target|source) as TSV lines "
                   "'source<TAB>target<TAB>probability'; NULL is written <NULL>.")
@click.option("--json", "as_json", is_flag=True,
              help='Print {"pairs", "source_vocab", "target_vocab", "null", "target_words", '
                   '"iterations", "log_likelihood": [...], "entries", "out"} to stdout.')
def ibm1(src, tgt, iterations, no_null, out, as_json):
    """Train IBM Model 1 on a parallel corpus: t(target word | source word).

    Tokens are the whitespace-separated, lower-cased words of each line (no
    other normalisation, as in GIZA++ or NLTK); line pairs with an empty side
    are skipped. The log-likelihood printed per iteration is
    sum over target words of log((1/L') sum_i t(y_j|x_i)), L' the source length
    (+1 for NULL); iteration 0 is the uniform start. EM never decreases it.

    \b
    Examples:
      attn-dyn ibm1 --src train.en --tgt train.de --iterations 5 --out t.tsv
      attn-dyn ibm1 --src a.txt --tgt b.txt -k 10 --no-null --json
    """
    from minimal_attn.experiments import text as lib
    from minimal_attn.experiments.io import check_output_file, write_text

    cfg = Ibm1Config(iterations=iterations, null=not no_null)
    if out is not None:
        check_output_file(out, inputs=(("src", src), ("tgt", tgt)))
    with ProgressBar() as bar:
        result = lib.run_ibm1(src, tgt, cfg, progress=bar)
    report = lib.ibm1_report(result)
    if out is not None:
        write_text(out, lib.ibm1_tsv(result))
    if as_json:
        click.echo(json.dumps({**report, "out": out}))
        return
    click.echo(lib.ibm1_summary(result))
    if out is not None:
        click.echo(f"wrote {report['entries']} entries to {out}")


@click.command(context_settings=CONTEXT)
@click.option("--src", required=True, metavar="FILE",
              help="Training source text, one sentence a line.")
@click.option("--tgt", required=True, metavar="FILE", help="Training target text, line-aligned.")
@click.option("--val-src", metavar="FILE", default=None, help="Held-out source text.")
@click.option("--val-tgt", metavar="FILE", default=None, help="Held-out target text.")
@click.option("--holdout", type=float, default=default(ProxyExperiment, "holdout"),
              show_default=True,
              help="Without --val-*, hold out this last fraction of the training pairs.")
@click.option("--max-pairs", type=int, default=None,
              help="Use only the first N training pairs (quick runs).")
@click.option("--tokenizer", type=click.Choice(list(TOKENIZERS)),
              default=default(ProxyExperiment, "tokenizer"), show_default=True,
              help="simple: lower-case, split on whitespace and punctuation; "
                   "whitespace: lower-case, split on whitespace.")
@click.option("--min-count", type=int, default=default(ProxyExperiment, "min_count"),
              show_default=True, help="Words seen fewer times in training become <unk>.")
@click.option("--dim", "d", type=int, default=default(ProxyConfig, "d"), show_default=True,
              help="Embedding width d.")
@click.option("--epochs", type=int, default=default(ProxyConfig, "epochs"), show_default=True)
@click.option("--batch-size", type=int, default=default(ProxyConfig, "batch_size"),
              show_default=True, help="Pairs per step.")
@click.option("--lr", type=float, default=default(ProxyConfig, "lr"), show_default=True,
              help="Adam step size; a loss that becomes non-finite or 100 times the uniform "
                   "model's stops the run (lower --lr).")
@click.option("--seed", type=int, default=default(ProxyConfig, "seed"), show_default=True)
@click.option("--ibm-iterations", type=int, default=default(ProxyExperiment, "ibm_iterations"),
              show_default=True,
              help="EM iterations (no NULL) for beta^IBM; 1 gives Trans of Snell Eq. (17).")
@click.option("--percent", type=float, default=default(ProxyExperiment, "percent"),
              show_default=True, help="Top percentage of Snell Eq. (10).")
@click.option("--out", metavar="FILE", default=None,
              help="Write the JSON report (the --json keys) here.")
@click.option("--json", "as_json", is_flag=True,
              help='Print the report {"train_pairs", "heldout_pairs", "source_vocab", '
                   '"target_vocab", "config", "ibm_iterations", "percent", "min_count", '
                   '"history": [{"epoch", "train_loss", "val_loss"}], "agreement", '
                   '"baseline", "kendall_tau", "n_words"} to stdout.')
def proxy(src, tgt, val_src, val_tgt, out, as_json, d, epochs, batch_size, lr, seed,
          **options):
    """Train the bag-of-words proxy model and compare its probe with IBM Model 1 (Eqs. 5, 14).

    Reports, over the output words of held-out pairs, the agreement
    A(beta^px, beta^IBM) of Snell Eq. (10) (is the top source position of the proxy's
    probe, Eq. 6, among the top --percent of IBM Model 1's, Eq. 18?), its
    random baseline and Kendall's tau. The source predicts the target.

    \b
    Examples:
      attn-dyn proxy --src train.de --tgt train.en --max-pairs 5000 --epochs 3
      attn-dyn proxy --src train.de --tgt train.en --val-src val.de --val-tgt val.en --json
    """
    from minimal_attn.errors import InputError
    from minimal_attn.experiments import text as lib
    from minimal_attn.experiments.io import check_output_file, write_json

    model = ProxyConfig(d=d, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed)
    cfg = config(ProxyExperiment, model=model, **options)
    if (val_src is None) != (val_tgt is None):
        raise InputError("give both --val-src and --val-tgt, or neither")
    lib.check_proxy(cfg)
    if out is not None:
        check_output_file(out, inputs=(("src", src), ("tgt", tgt), ("val_src", val_src),
                                       ("val_tgt", val_tgt)))
    with ProgressBar() as bar:
        report = lib.run_proxy(src, tgt, cfg, val=val_src and (val_src, val_tgt),
                               progress=bar)
    if out is not None:
        write_json(out, report)
    if as_json:
        click.echo(json.dumps(report))
        return
    click.echo(lib.proxy_summary(report))
    if out is not None:
        click.echo(f"wrote {out}")
