from vmplane.cli.main import main

main()
