-- A watch's label (issue 19 item 4): free text the account gives it ("Deposits, shop EU"),
-- shown wherever watches are listed or picked. NULL: no label.
ALTER TABLE watches ADD COLUMN label text CHECK (char_length(label) BETWEEN 1 AND 100);
