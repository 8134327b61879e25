from gquery.cli import main

if __name__ == "__main__":  # not when a worker process (spawn) imports the main module again
    main()
