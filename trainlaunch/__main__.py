"""``python -m trainlaunch``."""

from trainlaunch.cli.boundary import main

if __name__ == "__main__":
    main()
