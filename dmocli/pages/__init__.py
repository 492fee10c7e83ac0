"""Pages a person reads: one self-contained HTML file for a model (`dmo train --html`, `dmo report MODEL`), an
evaluation and a monitoring history, made from what the commands already write (a report JSON, a model file, a
history), never from the data again. docs/pages.md says what each page shows.
"""
