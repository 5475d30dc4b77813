"""Result records, bottom up: their schema (``schema``), a record's identity (``key``), building and checking one
(``build``), the results file (``results_file``), and the pip requirements a study's records were measured with
(``environment_files``). No torch and no pandas; nothing is imported here, so a caller loads only what it names."""
