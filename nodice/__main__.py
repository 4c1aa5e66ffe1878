from nodice.cli import main

main()
