"""``python -m archsql`` runs the command line."""

from archsql.cli import main

if __name__ == "__main__":
    main()
