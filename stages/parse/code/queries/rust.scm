(struct_item name: (_) @name) @definition.struct
(union_item name: (_) @name) @definition.struct
(enum_item name: (_) @name) @definition.enum
(trait_item name: (_) @name) @definition.trait
(impl_item trait: (_)? @trait type: (_) @name) @definition.impl
(mod_item name: (_) @name body: (_)) @definition.module
(function_item name: (_) @name) @definition.function
(macro_definition name: (_) @name) @definition.function
(use_declaration argument: (_) @import.use)
(mod_item name: (_) @import.mod !body)
