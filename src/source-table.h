/*
 * source-table.h: the outside systems of source.c's table, one line each, in
 * the order spur lists them; everything else a system means is in its file.
 */
SOURCE_ENTRY(source_github)
SOURCE_ENTRY(source_slack)
SOURCE_ENTRY(source_linear)
SOURCE_ENTRY(source_gitlab)
SOURCE_ENTRY(source_gitea)
