r"""Data readers of both papers: what turns files (or a seed) into arrays.

* :mod:`.splits`: mosaic data sets by name (V&R Secs. 2.4 and 5): synthetic, CIFAR-10/100,
  vector mosaics; the one place that picks foreground classes;
* :mod:`.mosaics`: image mosaics from labelled images (V&R Sec. 2.4);
* :mod:`.cifar`: the CIFAR-10/100 python pickles;
* :mod:`.hatexplain`: HateXplain posts with their human rationales (V&R Sec. 5), and
  :mod:`.hatexplain_encode`: the posts padded to arrays, their SAIF summaries;
* :mod:`.text`: word vocabularies and padded batches for the text FCAM;
* :mod:`.seq`: Snell et al.'s data: parallel text and labelled sentences (Sec. 3);
* :mod:`.pieces`: SentencePiece models for the translation tasks (A.8);

The library takes data folders as arguments; nothing here knows where a folder lives.
"""
