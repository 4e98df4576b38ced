package mysql

// Redacted is what String and errors name the server of dsn by.
func Redacted(dsn string) (string, error) {
	conf, err := parseDSN(dsn)
	if err != nil {
		return "", err
	}
	return redact(conf), nil
}
