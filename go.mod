module github.com/pylucid/pylucid

go 1.26.8
