module github.com/heraldhq/herald/schemas

go 1.26.0
