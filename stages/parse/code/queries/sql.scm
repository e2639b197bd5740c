(create_table (object_reference) @name) @definition.table
(create_view (object_reference) @name) @definition.view
(create_materialized_view (object_reference) @name) @definition.view
(create_function (object_reference) @name) @definition.function
(create_type (object_reference) @name) @definition.type
(create_index column: (_) @name) @definition.index
