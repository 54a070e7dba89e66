-- stores: indexes for paged store lists and display-name lookups

-- Store lists page in byte order of the name (COLLATE "C", the order of the cursor), and a name
-- prefix is a range of that order: one btree range scan serves both, whatever the database's
-- collation. The unique index on name, in the database's collation, serves neither.
CREATE INDEX stores_name_bytes ON stores (name COLLATE "C");

-- find_store and name_taken look a store up by display name as well as by name: without this,
-- every store creation and every lookup by display name read the whole table.
CREATE INDEX stores_display_name ON stores (display_name);
