"""``attn-dyn ibm1`` and ``attn-dyn proxy``: the second paper's NumPy side on parallel text.

Snell et al. (2021), Sections 2.3 and 4: IBM Model 1 (EM of Brown et al.,
1993) and the bag-of-words proxy model, compared with the agreement of Eq. (10).
"""

import json
import os
import sys

import click

from minimal_attn.errors import InputError, check_int_at_least, check_positive

_CTX = {"help_option_names": ["-h", "--help"]}


def _check_out_file(out):
    """Validate an output file path before any work, so errors come before writing."""
    if out is None:
        return
    from minimal_attn.io import ensure_dir

    if os.path.isdir(out):
        raise InputError(f"--out {out} is a folder; give a file name")
    ensure_dir(os.path.dirname(os.path.abspath(out)))


def _ibm1_tsv_lines(model, src_itos, tgt_itos):
    """``source<TAB>target<TAB>probability`` for every non-zero entry; NULL as ``<NULL>``."""
    from minimal_attn.ibm1 import NULL_WORD

    names = list(src_itos) + ([NULL_WORD] if model.null else [])
    s, t, p = model.entries()
    return "".join(f"{names[i]}\t{tgt_itos[o]}\t{q!r}\n"
                   for i, o, q in zip(s.tolist(), t.tolist(), p.tolist()))


@click.command(context_settings=_CTX)
@click.option("--src", required=True, metavar="FILE",
              help="Source text, one sentence per line (the side that predicts).")
@click.option("--tgt", required=True, metavar="FILE",
              help="Target text, line-aligned with --src (the side that is predicted).")
@click.option("--iterations", "-k", type=int, default=5, show_default=True,
              help="EM iterations, starting from the uniform table t(o|i) = 1/|O|.")
@click.option("--no-null", is_flag=True,
              help="Leave out the NULL source word (Brown et al.'s e_0).")
@click.option("--out", metavar="FILE", default=None,
              help="Write every non-zero t(target|source) as TSV lines "
                   "'source<TAB>target<TAB>probability'; NULL is written <NULL>.")
@click.option("--json", "as_json", is_flag=True,
              help='Print {"pairs", "source_vocab", "target_vocab", "null", '
                   '"log_likelihood": [...], "entries"} to stdout.')
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
    from minimal_attn.ibm1 import train_ibm1
    from minimal_attn.io import atomic_open
    from minimal_attn.text_data import Vocab, read_parallel, whitespace_tokens

    iterations = check_int_at_least("--iterations", iterations, 1)
    _check_out_file(out)
    src_tok, tgt_tok = read_parallel(src, tgt, whitespace_tokens)
    src_vocab = Vocab.build(src_tok, unk=False)
    tgt_vocab = Vocab.build(tgt_tok, unk=False)

    with click.progressbar(length=iterations, label="EM", file=sys.stderr, show_pos=True,
                           item_show_func=lambda ll: ll and f"log-likelihood {ll:.2f}"
                           ) as bar:
        model = train_ibm1(src_vocab.encode_all(src_tok), tgt_vocab.encode_all(tgt_tok),
                           len(src_vocab), len(tgt_vocab), iterations=iterations,
                           null=not no_null, callback=lambda k, ll: bar.update(1, ll))
    n_entries = int((model.entries()[2] > 0).sum())
    if out is not None:
        text = _ibm1_tsv_lines(model, src_vocab.itos, tgt_vocab.itos)
        with atomic_open(out, "w", encoding="utf-8") as f:
            f.write(text)

    n_words = sum(len(t) for t in tgt_tok)
    if as_json:
        click.echo(json.dumps({"pairs": len(src_tok), "source_vocab": len(src_vocab),
                               "target_vocab": len(tgt_vocab), "null": not no_null,
                               "target_words": n_words, "iterations": iterations,
                               "log_likelihood": model.log_likelihood,
                               "entries": n_entries, "out": out}))
        return
    click.echo(f"{len(src_tok)} pairs, {len(src_vocab)} source and {len(tgt_vocab)} target "
               f"words, NULL {'off' if no_null else 'on'}")
    click.echo(f"  {'iteration':>9s} {'log-likelihood':>16s} {'per target word':>16s}")
    for k, ll in enumerate(model.log_likelihood):
        click.echo(f"  {k:9d} {ll:16.4f} {ll / n_words:16.6f}")
    if out is not None:
        click.echo(f"wrote {n_entries} entries to {out}")


def _split(src, tgt, val_src, val_tgt, holdout, tokenizer, max_pairs):
    """Training and held-out token lists: the --val files, or the last --holdout fraction."""
    from minimal_attn.text_data import read_parallel

    if (val_src is None) != (val_tgt is None):
        raise InputError("give both --val-src and --val-tgt, or neither")
    train = read_parallel(src, tgt, tokenizer)
    if max_pairs is not None:
        train = (train[0][:max_pairs], train[1][:max_pairs])
    if val_src is not None:
        return train, read_parallel(val_src, val_tgt, tokenizer)
    if not 0.0 < holdout < 1.0:
        raise InputError(f"--holdout must lie strictly between 0 and 1, got {holdout}")
    n_val = int(round(holdout * len(train[0])))
    if n_val < 1 or n_val >= len(train[0]):
        raise InputError(f"cannot hold out {holdout:g} of {len(train[0])} pairs; give more "
                         "pairs, another --holdout, or --val-src/--val-tgt")
    cut = len(train[0]) - n_val
    return (train[0][:cut], train[1][:cut]), (train[0][cut:], train[1][cut:])


@click.command(context_settings=_CTX)
@click.option("--src", required=True, metavar="FILE",
              help="Training source text, one sentence a line.")
@click.option("--tgt", required=True, metavar="FILE", help="Training target text, line-aligned.")
@click.option("--val-src", metavar="FILE", default=None, help="Held-out source text.")
@click.option("--val-tgt", metavar="FILE", default=None, help="Held-out target text.")
@click.option("--holdout", type=float, default=0.1, show_default=True,
              help="Without --val-*, hold out this last fraction of the training pairs.")
@click.option("--max-pairs", type=int, default=None,
              help="Use only the first N training pairs (quick runs).")
@click.option("--tokenizer", type=click.Choice(["simple", "whitespace"]), default="simple",
              show_default=True,
              help="simple: lower-case, split on whitespace and punctuation; "
                   "whitespace: lower-case, split on whitespace.")
@click.option("--min-count", type=int, default=2, show_default=True,
              help="Words seen fewer times in training become <unk>.")
@click.option("--dim", type=int, default=64, show_default=True, help="Embedding width d.")
@click.option("--epochs", type=int, default=5, show_default=True)
@click.option("--batch-size", type=int, default=64, show_default=True, help="Pairs per step.")
@click.option("--lr", type=float, default=0.01, show_default=True, help="Adam step size.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--ibm-iterations", type=int, default=1, show_default=True,
              help="EM iterations (no NULL) for beta^IBM; 1 gives Trans of Eq. (17).")
@click.option("--percent", type=float, default=5.0, show_default=True,
              help="Top percentage of Eq. (10).")
@click.option("--out", metavar="FILE", default=None, help="Write the JSON report here.")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report to stdout.")
def proxy(src, tgt, val_src, val_tgt, holdout, max_pairs, tokenizer, min_count, dim, epochs,
          batch_size, lr, seed, ibm_iterations, percent, out, as_json):
    """Train the bag-of-words proxy model and compare its probe with IBM Model 1 (Eqs. 5, 14).

    Reports, over the output words of held-out pairs, the agreement
    A(beta^px, beta^IBM) of Eq. (10) (is the top source position of the proxy's
    probe, Eq. 6, among the top --percent of IBM Model 1's, Eq. 18?), its
    random baseline and Kendall's tau. The source predicts the target.

    \b
    Examples:
      attn-dyn proxy --src train.de --tgt train.en --max-pairs 5000 --epochs 3
      attn-dyn proxy --src train.de --tgt train.en --val-src val.de --val-tgt val.en --json
    """
    import numpy as np

    from minimal_attn.agreement import average_agreement
    from minimal_attn.ibm1 import beta_ibm, train_ibm1
    from minimal_attn.io import write_json
    from minimal_attn.proxy import ProxyConfig, beta_px, train_proxy
    from minimal_attn.text_data import Vocab, tokenize, whitespace_tokens

    if max_pairs is not None:
        check_int_at_least("--max-pairs", max_pairs, 2)
    for name, value in (("--min-count", min_count), ("--dim", dim),
                        ("--batch-size", batch_size), ("--ibm-iterations", ibm_iterations)):
        check_int_at_least(name, value, 1)
    check_int_at_least("--epochs", epochs, 1)
    check_positive("--lr", lr)
    if not 0.0 < percent <= 100.0:
        raise InputError(f"--percent must lie in (0, 100], got {percent}")
    _check_out_file(out)
    tok = tokenize if tokenizer == "simple" else whitespace_tokens
    (tr_src, tr_tgt), (va_src, va_tgt) = _split(src, tgt, val_src, val_tgt, holdout, tok,
                                                max_pairs)
    src_vocab = Vocab.build(tr_src, min_count=min_count)
    tgt_vocab = Vocab.build(tr_tgt, min_count=min_count)
    x_tr, y_tr = src_vocab.encode_all(tr_src), tgt_vocab.encode_all(tr_tgt)
    x_va, y_va = src_vocab.encode_all(va_src), tgt_vocab.encode_all(va_tgt)

    cfg = ProxyConfig(d=dim, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed)
    with click.progressbar(length=epochs, label="proxy", file=sys.stderr, show_pos=True,
                           item_show_func=lambda r: r and f"val loss {r['val_loss']:.3f}"
                           ) as bar:
        params, history = train_proxy(x_tr, y_tr, len(src_vocab), len(tgt_vocab), cfg,
                                      val=(x_va, y_va),
                                      callback=lambda e, rec: bar.update(1, rec))
    table = train_ibm1(x_tr, y_tr, len(src_vocab), len(tgt_vocab), iterations=ibm_iterations,
                       null=False)
    b_px = [beta_px(params, x, y) for x, y in zip(x_va, y_va)]
    b_ibm = [np.asarray(beta_ibm(table, x, y)) for x, y in zip(x_va, y_va)]
    scores = average_agreement(b_px, b_ibm, percent=percent)
    report = {"train_pairs": len(x_tr), "heldout_pairs": len(x_va),
              "source_vocab": len(src_vocab), "target_vocab": len(tgt_vocab),
              "config": vars(cfg), "ibm_iterations": ibm_iterations, "percent": percent,
              "history": history, **scores}
    if out is not None:
        write_json(out, report)
    if as_json:
        click.echo(json.dumps(report))
        return
    click.echo(f"{len(x_tr)} training and {len(x_va)} held-out pairs; vocabularies "
               f"{len(src_vocab)} source, {len(tgt_vocab)} target (min count {min_count})")
    for rec in history:
        click.echo(f"  epoch {rec['epoch']:3d}  train loss {rec['train_loss']:.4f}  "
                   f"held-out loss {rec['val_loss']:.4f}  (per output word)")
    click.echo(f"A(beta^px, beta^IBM), top {percent:g}%: {scores['agreement']:.4f}  "
               f"(random baseline {scores['baseline']:.4f}) over {scores['n_words']} "
               "output words")
    if scores["kendall_tau"] is not None:
        click.echo(f"Kendall tau(beta^px, beta^IBM): {scores['kendall_tau']:.4f}")
    if out is not None:
        click.echo(f"wrote {out}")
