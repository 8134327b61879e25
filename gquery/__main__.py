from gquery.cli import main

main()
