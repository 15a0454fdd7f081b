r"""SentencePiece models for Snell's translation tasks (A.8: a vocabulary of 8,000 pieces
shared by source and target): trained on the training text, or loaded from a saved model so
that a resumed run sees the same ids. The ids 0, 1, 2 are ``<unk>``, ``<s>``, ``</s>``, as
:mod:`.seq` numbers them."""

import io
import os

from minimal_attn.errors import InputError


def sentencepiece_model(lines, vocab_size, model_file):
    """A SentencePiece model: loaded from ``model_file`` if it exists, else trained on ``lines``.

    Returns the processor and the serialised model (save it to reuse the ids).
    """
    import sentencepiece as spm

    if model_file is not None and os.path.exists(model_file):
        try:
            with open(model_file, "rb") as f:
                proto = f.read()
            return spm.SentencePieceProcessor(model_proto=proto), proto
        except (OSError, RuntimeError) as exc:
            raise InputError(f"SentencePiece model {model_file} cannot be read "
                             f"({type(exc).__name__}): delete it and the runs beside it, or "
                             "use another --out", param="out") from None
    buf = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(lines), model_writer=buf, vocab_size=vocab_size,
            hard_vocab_limit=False, model_type="unigram", character_coverage=1.0,
            unk_id=0, bos_id=1, eos_id=2, pad_id=-1, num_threads=1, minloglevel=2)
    except RuntimeError:
        # the pieces must cover every character of the text, plus <unk>, <s>, </s>
        need = len(set("".join(lines).replace(" ", "")) | {" "}) + 3
        raise InputError(f"vocab_size {vocab_size} is too small for SentencePiece on this "
                         f"text ({need - 3} distinct characters): give vocab_size >= {need}",
                         param="vocab_size") from None
    proto = buf.getvalue()
    return spm.SentencePieceProcessor(model_proto=proto), proto
