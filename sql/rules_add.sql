-- One retry rule; the value is a number or an already-quoted string literal.
INSERT INTO {{.Table}} VALUES ({{.Value}});
