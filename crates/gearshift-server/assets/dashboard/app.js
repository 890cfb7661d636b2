// dashboard script
