package tests_go

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// Every exported name of the core packages has a doc comment, and every
// package a package comment, so that `go doc` reads as a manual.
func TestExportedNamesAreDocumented(t *testing.T) {
	var missing []string
	packages := map[string]bool{} // dir → has a package comment
	err := filepath.WalkDir("../core", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		packages[dir] = packages[dir] || f.Doc != nil
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				if !decl.Name.IsExported() || decl.Doc != nil || !exportedReceiver(decl) {
					continue
				}
				missing = append(missing, fset.Position(decl.Pos()).String()+" func "+decl.Name.Name)
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					switch spec := spec.(type) {
					case *ast.TypeSpec:
						if spec.Name.IsExported() && decl.Doc == nil && spec.Doc == nil {
							missing = append(missing, fset.Position(spec.Pos()).String()+" type "+spec.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range spec.Names {
							if n.IsExported() && decl.Doc == nil && spec.Doc == nil && spec.Comment == nil {
								missing = append(missing, fset.Position(n.Pos()).String()+" "+n.Name)
							}
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir, ok := range packages {
		if !ok {
			missing = append(missing, dir+": package comment")
		}
	}
	if len(packages) < 5 {
		t.Fatalf("found only %d packages under ../core", len(packages))
	}
	if len(missing) > 0 {
		t.Errorf("exported names without a doc comment:\n%s", strings.Join(missing, "\n"))
	}
}

// exportedReceiver reports whether decl is a function or a method of an
// exported type (methods of unexported types do not show in go doc).
func exportedReceiver(decl *ast.FuncDecl) bool {
	if decl.Recv == nil || len(decl.Recv.List) == 0 {
		return true
	}
	typ := decl.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	if idx, ok := typ.(*ast.IndexExpr); ok {
		typ = idx.X
	}
	id, ok := typ.(*ast.Ident)
	return ok && id.IsExported()
}
