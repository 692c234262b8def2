"""`python -m archiver`: the archiver process (archiver/consumer.py)."""

from archiver.consumer import main

if __name__ == "__main__":
    main()
