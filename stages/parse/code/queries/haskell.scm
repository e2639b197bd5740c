(header module: (_) @package)
(data_type name: (_) @name) @definition.type
(newtype name: (_) @name) @definition.type
(class name: (_) @name) @definition.class
(instance name: (_) @trait patterns: (type_patterns . (_) @name)) @definition.impl
(function name: (_) @name) @definition.function
(import module: (_) @import.import)
