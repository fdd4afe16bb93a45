INSERT INTO bench_insert (v) VALUES ('benchmark row');
