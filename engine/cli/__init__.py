"""The command line, split by job: parser.py (every subcommand's options), decode.py (run, bench), measure.py (probe,
passes) and files.py (--json paths and results). engine/__main__.py parses, dispatches and turns bad input into one
error line."""
