"""`python -m ops.cli`: the `tally` command."""

from ops.cli import main

if __name__ == "__main__":
    main(prog_name="tally")  # speaks as the `tally` it is
